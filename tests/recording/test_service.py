"""The app's Recordings as the composition wires them: a call is recorded when the setting says so
(and says so: "● Recording", then "" at its end), its replay is built afterwards with progress,
retention reports what it freed, chat recording follows its own setting."""

from __future__ import annotations

import json
import threading
import time
from types import SimpleNamespace

import numpy as np

from desktop.engine.call import CallEvent
from desktop.engine.call_state import CallMode
from desktop.media.clock import VirtualClock
from desktop.media.fake_audio import FakeAudioOutput
from desktop.recording.service import RECORDING, Recordings
from desktop.settings import Settings


def fake_call(clock: VirtualClock) -> SimpleNamespace:
    """The parts of engine.call.Call a recording uses."""
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
