"""The Model page's "Conversations kept in memory": Automatic (0) or a number, shown and given back."""

from __future__ import annotations

from pathlib import Path

from desktop.settings import Settings
from desktop.ui.settings_dialog import SettingsDialog
from desktop.ui.settings_pages import AUTO_SLOTS

SHOTS = Path("/work/notes/shots")


def dialog(qtbot, settings: Settings) -> SettingsDialog:
    dlg = SettingsDialog(settings, sound_devices=[])
    qtbot.addWidget(dlg)
    dlg.open()
    qtbot.waitExposed(dlg)
    return dlg


def test_automatic_shows_in_words_and_a_number_round_trips(qtbot):
    dlg = dialog(qtbot, Settings())
    spin = dlg.pages[0].slots
    assert spin.value() == 0 and spin.text() == AUTO_SLOTS
    assert spin.width() >= spin.fontMetrics().horizontalAdvance(AUTO_SLOTS)  # the words are not cut
    if SHOTS.is_dir():
        dlg.grab().save(str(SHOTS / "slots-settings-auto.png"))
    spin.stepUp()
    assert dlg.form_values()["slots_per_worker"] == 1 and spin.text() == "1"
    spin.setValue(0)
    assert dlg.form_values()["slots_per_worker"] == 0
    chosen = dialog(qtbot, Settings(slots_per_worker=48))
    assert chosen.pages[0].slots.text() == "48"
