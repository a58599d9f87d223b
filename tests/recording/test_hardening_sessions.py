"""Issue 19, new-user item 6 (recordings): a refused or empty session leaves no recording; hanging up
during a reply is not a barge-in (no red mark, not counted); the spoken reply of a chat with the Voice
on is recorded as the AI track."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import numpy as np
import pytest
from helpers import FakeReply

from desktop.call.call import CallEvent
from desktop.call.state import CallMode
from desktop.chat.conversations import Conversation, StoredMessage
from desktop.speech.voice_audio import VoiceEvent, VoiceEventKind
from desktop.media.clock import VirtualClock
from desktop.media.fake_audio import FakeAudioOutput
from desktop.recording.call_hook import CallRecording
from desktop.recording.library import scan
from desktop.recording.reader import open_recording
from desktop.recording.service import Recordings
from desktop.recording.writer import SessionRecorder
from desktop.settings import Settings

pytestmark = pytest.mark.hardening


def fake_call(clock: VirtualClock) -> SimpleNamespace:
    return SimpleNamespace(clock=clock, state=SimpleNamespace(mode=CallMode.DUPLEX),
                           mic=SimpleNamespace(sample_rate=16000), listeners=[], frame_taps=[])


def test_a_refused_chat_reply_leaves_no_recording(tmp_path):
    recs = Recordings(lambda: Settings(record_chats=True), tmp_path)
    conv = Conversation("c1", messages=[StoredMessage("user", "hello?")])
    reply = FakeReply(conv)
    recs.chats.observe(reply)
    reply.stream(failed="The queue is full.")  # refused before a word
    empty = FakeReply(Conversation("c2", messages=[StoredMessage("user", "hi")]))
    recs.chats.observe(empty)
    empty.stream()  # done, with no text
    recs.close()
    assert recs.chats.sessions == {} and scan(tmp_path) == []


def test_a_call_hung_up_before_a_word_leaves_no_recording(tmp_path):
    lines: list[str] = []
    recs = Recordings(Settings, tmp_path, status=lines.append)
    clock = VirtualClock()
    call = fake_call(clock)
    recording = recs.record_call(call, FakeAudioOutput(clock, device_rate=48000))
    for _ in range(50):  # a second of room noise, nothing said
        for tap in call.frame_taps:
            tap(np.full(320, 0.001, np.float32), clock.now())
        clock.advance(0.02)
    for listener in list(call.listeners):
        listener(CallEvent("ended", "user"))
    rec = recording.finish().result(10)
    assert rec.discarded and not rec.folder.exists() and scan(tmp_path) == []
    recs.close()
    assert not any("could not" in line for line in lines)  # no replay was tried on a folder gone


def test_a_call_where_something_was_said_is_kept(tmp_path):
    rec = SessionRecorder(tmp_path, "call", clock=VirtualClock(), keep_empty=False)
    rec.event("user_text", text="hello", turn=1)
    assert not rec.close().result(10).discarded and len(scan(tmp_path)) == 1


def test_hanging_up_during_a_reply_is_not_a_barge_in(tmp_path):
    clock = VirtualClock()
    recorder = SessionRecorder(tmp_path, "call", clock=clock)
    recording = CallRecording(recorder)
    call = fake_call(clock)
    recording.attach(call)
    say = recording.on_event
    say(CallEvent("user", "Tell me a story."))
    say(CallEvent("assistant", "Once upon a time there was"))
    clock.advance(2.0)
    say(CallEvent("cut", "Once upon", reason="barge_in"))  # the user talked over it: one barge-in
    say(CallEvent("user", "Another one."))
    say(CallEvent("assistant", "A dragon lived"))
    clock.advance(1.0)
    say(CallEvent("cut", "A dragon", reason="ended"))  # then hung up while it spoke
    say(CallEvent("ended", "user"))
    recording.finish().result(10)
    opened = open_recording(recorder.folder)
    assert len(opened.barge_ins) == 1  # "2 barge-ins" before
    first, second = opened.turns
    assert first.barge_in_t is not None and first.heard == "Once upon"
    assert second.barge_in_t is None and second.stopped == "ended" and second.heard == "A dragon"


class FakeVoice:
    """What the chat hook uses of a Voice: listeners, the kept audio, when it first sounded."""

    available = True

    def __init__(self, clock) -> None:
        self.listeners, self.clock = [], clock
        self.audio = {"r1": (np.full(22050, 0.3, np.float32), 22050)}
        self.first = {"r1": clock.now() + 0.4}

    def add_listener(self, listener) -> None:
        self.listeners.append(listener)

    def audio_of(self, rid):
        return self.audio.get(rid)

    def first_audio_at(self, rid):
        return self.first.get(rid)

    def heard_s(self, rid):
        return 0.5

    def finish(self, rid: str, stopped: bool = False) -> None:
        for listener in self.listeners:
            listener(VoiceEvent(VoiceEventKind.FINISHED, rid, stopped=stopped))


def test_a_spoken_chat_reply_is_recorded_as_the_ai_track(tmp_path):
    clock = VirtualClock(50.0)
    voice = FakeVoice(clock)
    settings = Settings(record_chats=True)
    recs = Recordings(lambda: settings, tmp_path, voice=lambda: voice)
    recs.chats.open_session = lambda title: SessionRecorder(tmp_path, "chat", title=title, clock=clock, keep_empty=False)
    conv = Conversation("c1", messages=[StoredMessage("user", "Say hi")])
    reply = FakeReply(conv)
    reply.request_id = "r1"
    recs.chats.observe(reply)
    reply.stream("Hi there!")
    clock.advance(2.0)
    done = threading.Event()
    threading.Thread(target=lambda: (voice.finish("r1"), done.set())).start()  # the voice's own thread
    assert done.wait(5)
    folder = recs.chats.sessions["c1"].recorder.folder
    recs.close()
    opened = open_recording(folder)
    assert not opened.ai.empty and opened.ai.rate == 22050
    assert opened.ai.duration == pytest.approx(1.4, abs=0.05)  # placed at its first sound (0.4 s), 1 s long
    assert np.abs(opened.ai.read(0.5, 1.3)).max() > 0.2
