"""The preset editor's voice and rate: a built-in shows the Settings' voice at its own pace, Save
as preset keeps the chosen voice and rate, one's own preset keeps a new rate at once; a reply in
the chat is spoken in its conversation's preset voice; and a picture of the editor."""

from __future__ import annotations

from types import SimpleNamespace

from PySide6.QtWidgets import QWidget

from desktop.chat.presets import PresetStore
from desktop.model.tts import list_voices
from desktop.speech.finished import FinishedReplies
from desktop.ui.chat.message_view import MessageView
from desktop.ui.chat.preset_bar import PresetBar
from desktop.ui.chat.voice_control import ChatVoice

SHOTS = "/work/notes/shots"


def test_the_preset_editor_holds_a_voice_and_a_rate(tmp_path, qtbot, screenshot):
    presets = PresetStore(tmp_path)
    bar = PresetBar(presets, settings_voice=lambda: "Piper · default")
    qtbot.addWidget(bar)
    bar.resize(900, 260)
    bar.set_conversation("assistant", presets.get("assistant").prompt, True)
    bar.toggle.setChecked(True)
    bar.show()
    speech = bar.speech
    assert speech.isVisible() and speech.value() == (None, 1.0)
    assert speech.voice.currentText() == "As in Settings (Piper · default)"
    espeak = speech.voice.findData("espeak:en-us")
    piper = [f"piper:{name}" for name in list_voices()["piper"]]
    assert espeak > 0 and piper and all(speech.voice.findData(v) > 0 for v in piper)  # installed voices, both engines
    speech.voice.setCurrentIndex(espeak)
    speech.rate.setValue(1.25)
    saved: list[str] = []
    bar.status.connect(saved.append)
    bar.name.setText("Quick")
    bar.save_button.click()
    quick = PresetStore(tmp_path).get("user-quick")
    assert (quick.voice, quick.rate) == ("espeak:en-us", 1.25)
    speech.rate.setValue(1.5)
    speech.rate.editingFinished.emit()  # as leaving the field does
    assert PresetStore(tmp_path).get("user-quick").rate == 1.5 and saved[-1].startswith("Saved the voice")
    bar.combo.setCurrentIndex(bar.combo.findData("concise"))
    bar.combo.activated.emit(bar.combo.currentIndex())  # a built-in: the Settings' voice again
    assert speech.value() == (None, 1.0)
    bar.combo.setCurrentIndex(bar.combo.findData("user-quick"))
    bar.combo.activated.emit(bar.combo.currentIndex())
    assert speech.value() == ("espeak:en-us", 1.5)
    screenshot(bar, "preset-editor-voice")
    bar.grab().save(f"{SHOTS}/preset-editor.png")
    bar.set_conversation("user-quick", quick.prompt, False)  # a conversation that has started: shown only
    assert not speech.isEnabled()


class FakeVoice:
    available, reason, speaking = True, None, False

    def __init__(self) -> None:
        self.finished, self.used, self.begun = FinishedReplies(), [], []

    def use(self, *speech) -> None:
        self.used.append(speech)

    def speak_begin(self, rid) -> None:
        self.begun.append(rid)

    def add_listener(self, fn) -> None:
        pass

    def prepare(self) -> None:
        pass


def test_a_chat_reply_is_spoken_in_its_conversations_preset_voice(tmp_path, qtbot):
    presets = PresetStore(tmp_path)
    quick = presets.add("Quick", "Be quick.", voice="espeak:en-us", rate=1.5)
    parent = QWidget()
    qtbot.addWidget(parent)
    chat_voice = ChatVoice(MessageView(), True, parent, presets)
    voice = FakeVoice()
    chat_voice.set_voice(voice)
    for preset_id in (quick.id, "assistant", ""):  # "" : a prompt edited by hand
        chat_voice.follow(SimpleNamespace(conv=SimpleNamespace(preset=preset_id), listeners=[]))
    assert voice.used == [("espeak", "en-us", 1.5), (None, None, 1.0), (None, None, 1.0)]
