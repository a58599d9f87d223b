"""The Model page's "GGUF files run on" (issue 23 §2): llama.cpp by default, torch when chosen;
shown and given back, and a change asks for a reload."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt

from desktop.settings import Settings
from desktop.ui.settings_dialog import SettingsDialog

SHOTS = Path("/work/notes/shots")


def dialog(qtbot, settings: Settings) -> SettingsDialog:
    dlg = SettingsDialog(settings, sound_devices=[])
    qtbot.addWidget(dlg)
    dlg.open()
    qtbot.waitExposed(dlg)
    return dlg


def test_the_runner_is_shown_and_a_change_is_given_back(qtbot):
    dlg = dialog(qtbot, Settings(model_source="/models/llama-3.2-1b.Q4_K_M.gguf"))
    combo = dlg.pages[0].gguf_runner
    assert combo.currentData() == "llamacpp" and combo.currentText().startswith("llama.cpp")
    if SHOTS.is_dir():
        dlg.grab().save(str(SHOTS / "gguf-settings-model.png"))
    combo.setCurrentIndex(combo.findData("torch"))
    assert dlg.form_values()["gguf_runner"] == "torch"
    with qtbot.waitSignal(dlg.applied) as sig:
        qtbot.mouseClick(dlg.ok_button, Qt.MouseButton.LeftButton)
    assert sig.args[0].gguf_runner == "torch"
    again = dialog(qtbot, Settings(gguf_runner="torch"))
    assert again.pages[0].gguf_runner.currentData() == "torch"
