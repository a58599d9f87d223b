"""The settings dialog's Audio page, spoken replies part: on/off, engine, the engine's voices (default
first, a missing one kept), volume round-trips exactly, and a picture of it."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from desktop.model.tts import list_voices
from desktop.settings import Settings
from desktop.ui.settings_audio import AudioPage
from desktop.ui.settings_dialog import SettingsDialog

DEVICES = ["Built-in Audio Analog Stereo", "USB Headset"]


@pytest.fixture
def make(qtbot):
    def make(settings: Settings | None = None) -> tuple[SettingsDialog, AudioPage]:
        dlg = SettingsDialog(settings or Settings(), sound_devices=DEVICES)
        qtbot.addWidget(dlg)
        dlg.open()
        qtbot.waitExposed(dlg)
        audio = dlg.pages[3]
        dlg.tabs.setCurrentWidget(audio)
        return dlg, audio

    return make


def items(combo) -> list[str]:
    return [combo.itemText(i) for i in range(combo.count())]


def test_shows_the_voice_settings_and_round_trips_them(make):
    s = Settings(voice_enabled=True, tts_engine="espeak", tts_voice="en-gb-x-rp", volume=0.75)
    dlg, audio = make(s)
    assert audio.speak.isChecked() and audio.engine.currentData() == "espeak"
    assert audio.voice.currentData() == "en-gb-x-rp" and items(audio.voice)[0] == "Default (en-us)"
    assert audio.volume.value() == 75 and audio.volume_label.text() == "75 %"
    assert audio.engine.isEnabled() and audio.voice.isEnabled()
    assert dlg.form_values() == s.model_dump() and not dlg.apply_button.isEnabled()


def test_defaults_offer_piper_with_its_packaged_voice(make):
    dlg, audio = make()
    assert not audio.speak.isChecked() and audio.engine.currentData() == "piper"
    assert items(audio.voice) == [f"Default ({list_voices()['piper'][0]})", *list_voices()["piper"]]
    assert audio.voice.currentData() is None and "2 s" in audio.engine_note.text()
    assert not audio.engine.isEnabled() and not audio.voice.isEnabled() and audio.volume.isEnabled()


def test_choosing_engine_voice_and_volume(make, qtbot):
    dlg, audio = make(Settings(tts_voice="en_US-joe-medium"))
    qtbot.mouseClick(audio.speak, Qt.MouseButton.LeftButton, pos=audio.speak.rect().bottomLeft() / 2)
    assert audio.speak.isChecked() and audio.voice.isEnabled()
    audio.engine.setCurrentIndex(audio.engine.findData("espeak"))
    assert audio.voice.currentData() is None  # a Piper voice is not an espeak-ng one: the default
    assert "en-us" in items(audio.voice) and "robotic" in audio.engine_note.text()
    audio.voice.setCurrentIndex(audio.voice.findData("en-us"))
    audio.volume.setValue(140)
    assert audio.volume_label.text() == "140 %" and dlg.apply_button.isEnabled()
    with qtbot.waitSignal(dlg.applied) as sig:
        qtbot.mouseClick(dlg.ok_button, Qt.MouseButton.LeftButton)
    new = sig.args[0]
    assert (new.voice_enabled, new.tts_engine, new.tts_voice, new.volume) == (True, "espeak", "en-us", 1.4)


def test_a_voice_that_is_not_installed_stays_chosen(make):
    dlg, audio = make(Settings(tts_engine="piper", tts_voice="de_DE-thorsten-low"))
    assert audio.voice.currentText() == "de_DE-thorsten-low (not installed)"
    assert dlg.form_values()["tts_voice"] == "de_DE-thorsten-low"


def test_an_odd_volume_is_kept_exactly_until_moved(make):
    dlg, audio = make(Settings(volume=0.333))
    assert audio.volume.value() == 33 and not dlg.apply_button.isEnabled()
    assert dlg.form_values()["volume"] == 0.333
    audio.volume.setValue(34)
    assert dlg.form_values()["volume"] == 0.34


def test_picture_of_the_audio_page_with_voice_on(make, screenshot):
    _dlg, audio = make(Settings(voice_enabled=True, tts_engine="piper", volume=0.8))
    screenshot(audio.window(), "settings-audio-voice")


def test_no_engines_installed_still_shows_a_usable_page(qtbot):
    page = AudioPage(Settings(voice_enabled=True), [], voices={"piper": [], "espeak": []})
    qtbot.addWidget(page)
    assert items(page.voice) == ["Default"] and "No Piper voice" in page.engine_note.text()
    assert page.values()["tts_voice"] is None
