"""The "End of turn" setting (issue 21) on the Calls page of the Settings dialog: it shows the
saved choice, and a change is applied as the setting the next call reads."""

from __future__ import annotations

import os
from pathlib import Path

from desktop.settings import Settings
from desktop.ui.settings_call import CallsPage
from desktop.ui.settings_dialog import SettingsDialog

SHOTS = Path(os.environ.get("OMNIDESK_SHOTS", "test-artifacts"))


def test_end_of_turn_is_a_choice_on_the_calls_page(qtbot, screenshot):
    dlg = SettingsDialog(Settings(end_of_turn="silence"), sound_devices=[], page="Calls")
    qtbot.addWidget(dlg)
    dlg.open()
    qtbot.waitExposed(dlg)
    page = dlg.tabs.currentWidget()
    assert isinstance(page, CallsPage) and "end_of_turn" in page.fields
    assert page.end_of_turn.currentData() == "silence" and page.values()["end_of_turn"] == "silence"
    assert [page.end_of_turn.itemData(i) for i in range(page.end_of_turn.count())] == ["smart", "silence"]
    assert not dlg.apply_button.isEnabled()
    applied = []
    dlg.applied.connect(applied.append)
    page.end_of_turn.setCurrentIndex(page.end_of_turn.findData("smart"))
    assert dlg.apply_button.isEnabled() and dlg.apply() and applied[-1].end_of_turn == "smart"
    assert Settings().end_of_turn == "smart"  # the default
    screenshot(dlg, "settings_end_of_turn")
    if SHOTS.name != "test-artifacts":
        SHOTS.mkdir(parents=True, exist_ok=True)
        dlg.grab().save(str(SHOTS / "smart-settings-calls.png"))
