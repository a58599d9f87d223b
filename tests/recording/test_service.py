"""The app's Recordings as the composition wires them: a call is recorded when the setting says so
(and says so: "● Recording", then "" at its end), its replay is built afterwards with progress,
retention reports what it freed, chat recording follows its own setting."""

from __future__ import annotations

import json
import threading
import time
from types import SimpleNamespace

import numpy as np

from helpers import FakeReply
from desktop.call.call import CallEvent
from desktop.call.state import CallMode
from desktop.chat.conversations import Conversation, StoredMessage
from desktop.media.clock import VirtualClock
from desktop.media.fake_audio import FakeAudioOutput
from desktop.recording.library import scan
from desktop.recording.service import RECORDING, Recordings
from desktop.recording.writer import live_folders
from desktop.settings import Settings


def fake_call(clock: VirtualClock) -> SimpleNamespace:
    """The parts of call.call.Call a recording uses."""
    return SimpleNamespace(clock=clock, state=SimpleNamespace(mode=CallMode.DUPLEX),
                           mic=SimpleNamespace(sample_rate=16000), listeners=[], frame_taps=[])


def test_a_call_is_recorded_then_its_replay_built(tmp_path):
    settings = Settings()
    assert settings.recording_enabled and not settings.record_chats  # calls on by default, chats off
    lines: list[str] = []
    states: list[str] = []
    ready = threading.Event()

    def status(text: str) -> None:
        lines.append(text)
        if "ready" in text or "could not" in text:
            ready.set()

    recs = Recordings(lambda: settings, tmp_path, status=status)
    clock = VirtualClock()
    speaker = FakeAudioOutput(clock, device_rate=48000)
    call = fake_call(clock)
    recording = recs.record_call(call, speaker, model="tiny", on_state=states.append)
    assert states == [RECORDING] and call.frame_taps and speaker.on_played
    for i in range(100):
        for tap in call.frame_taps:
            tap(np.full(320, 0.1, np.float32), clock.now())
        clock.advance(0.02)
    for listener in call.listeners:
        listener(CallEvent("user", "hello"))
        listener(CallEvent("ended", "user"))
    assert ready.wait(20) and lines[-1] == "The call's replay is ready (Recordings)."
    assert any(line.startswith("Building the call's replay…") for line in lines)
    assert states == [RECORDING, ""]
    meta = json.loads((recording.recorder.folder / "meta.json").read_text())
    assert meta["model"] == "tiny" and meta["settings"]["call_mode"] == "duplex" and meta["ai_rate"] == 24000
    assert meta["replay"]["audio"] == "replay.wav" and (recording.recorder.folder / "replay.wav").is_file()

    settings.recording_enabled = False
    assert recs.record_call(fake_call(clock), speaker) is None
    recs.close()


def test_clean_up_reports_what_it_freed(tmp_path):
    settings = Settings(retention_days=1)
    lines: list[str] = []
    recs = Recordings(lambda: settings, tmp_path, status=lines.append)
    old = tmp_path / "20200101-000000-call-0123abcd"
    old.mkdir()
    (old / "meta.json").write_text(json.dumps({"started_at": time.time() - 3 * 86400, "ended_at": 1.0}))
    freed = recs.clean_up()
    assert freed.by_age == [old.name] and not old.exists() and recs.last_freed is freed
    assert lines and lines[-1].startswith("Recordings cleaned up: freed")
    recs.close()


def test_chats_carry_the_loaded_models_name_and_are_live_until_closed(tmp_path):
    """meta's model is the name the app shows for the loaded model, not the settings' "default";
    `live()` lists this app's open sessions only, not a folder an earlier run left unfinished."""
    settings = Settings(record_chats=True)
    assert settings.model_source == "default"
    loaded: list[str | None] = ["SmolLM2-135M-Instruct"]
    recs = Recordings(lambda: settings, tmp_path, model=lambda: loaded[0])
    left = tmp_path / "20200101-000000-chat-0123abcd"  # an earlier run's, never ended
    left.mkdir()
    (left / "meta.json").write_text(json.dumps({"type": "chat", "started_at": 1.0, "ended_at": None}))
    conv = Conversation("c1", title="Hello", messages=[StoredMessage("user", "hi")])
    reply = FakeReply(conv)
    recs.chats.observe(reply)
    reply.stream("Hello!")
    folder = recs.chats.sessions["c1"].recorder.folder
    assert recs.live() == {folder}
    rows = {r.folder.name: r for r in scan(tmp_path, recs.live())}
    assert rows[folder.name].live and not rows[left.name].live and not rows[left.name].complete
    loaded[0] = None  # no model loaded: the settings' source stands in
    other = FakeReply(Conversation("c2", messages=[StoredMessage("user", "yo")]))
    recs.chats.observe(other)
    other.stream("Yo!")
    second = recs.chats.sessions["c2"].recorder.folder
    recs.close()
    assert recs.live() == set()
    assert json.loads((folder / "meta.json").read_text())["model"] == "SmolLM2-135M-Instruct"
    assert json.loads((second / "meta.json").read_text())["model"] == "default"
    assert not any(r.live for r in scan(tmp_path, recs.live()))


def test_a_call_without_a_model_argument_takes_the_loaded_one(tmp_path):
    recs = Recordings(Settings, tmp_path, model=lambda: "SmolLM2-135M-Instruct")
    clock = VirtualClock()
    recording = recs.record_call(fake_call(clock), FakeAudioOutput(clock, device_rate=48000))
    assert recording.recorder.meta["model"] == "SmolLM2-135M-Instruct"
    assert recs.live() == {recording.recorder.folder}
    recording.recorder.close().result(10)
    assert recs.live() == set()
    recs.close()


def test_live_leaves_out_a_recording_stopped_by_a_disk_error_and_idle_chats_end_on_a_timer(tmp_path):
    """A chat session the disk stopped is not "being recorded" (the page would show it live for
    ever); an idle chat session ends on the service's own timer, not only at the next reply."""
    import asyncio

    service = Recordings(lambda: Settings(record_chats=True), tmp_path / "rec")
    recorder = service._open_chat("A chat")
    assert service.live() == {recorder.folder}
    recorder.failed = "The disk is full"  # what a write error leaves
    assert service.live() == set() and recorder.folder in live_folders()  # retention still leaves it alone
    recorder.close().result(5)

    class Conv:
        id, title, messages = "c1", "Idle chat", []

    service.chats.idle_close_s = 0.0
    service.chats._session(Conv())
    assert len(service.live()) == 1

    async def tick() -> None:
        task = asyncio.ensure_future(service.idle_chats_loop(every_s=0.01))
        for _ in range(200):
            await asyncio.sleep(0.01)
            if not service.live():
                break
        task.cancel()

    asyncio.run(tick())
    assert service.live() == set() and service.chats.sessions == {}
    service.close()
