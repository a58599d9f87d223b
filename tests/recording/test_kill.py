"""A recorder process killed with SIGKILL mid-recording: everything listed in its timeline is on
disk and readable, at most the last chunk is lost, and the folder reads as an unfinished session —
also when the writers are held all along (as from a call's end of speech to its reply's first
audio: at most one chunk may wait)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import soundfile

from desktop.recording.replay import read_timeline

CHILD = r"""
import sys, time
import numpy as np
from desktop.recording.chunker import AudioChunker
from desktop.recording.writer import SessionRecorder

rec = SessionRecorder(sys.argv[1], "call", ai_rate=24000)
held = sys.argv[2] == "held"
print("folder", rec.folder, flush=True)
handed = 0
def emit(blocks, start, rate):
    global handed
    rec.audio("user", blocks, rec.at(start), rate)
    handed += 1
    print("handed", handed, flush=True)
user = AudioChunker(emit, 16000, chunk_s=0.5)
t, frame = 0.0, (0.2 * np.sin(np.arange(320) / 3)).astype(np.float32)
while True:  # 20 ms frames, ten times faster than real time
    if held:
        rec.hold(60)  # asked all along: only the one-chunk rule lets the writers run
    user.feed(frame, t)
    rec.event("turn_metrics", turn=1, eos_to_audio_ms=t)
    t += 0.02
    time.sleep(0.002)
"""


@pytest.mark.parametrize("mode", ["free", "held"])
def test_a_killed_recorder_loses_at_most_the_last_chunk(tmp_path, mode):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path), mode], stdout=subprocess.PIPE, text=True,
                             env=env)
    try:
        folder = Path(child.stdout.readline().split(" ", 1)[1].strip())
        for line in child.stdout:
            if line.startswith("handed") and int(line.split()[1]) >= 12:
                break
        os.kill(child.pid, signal.SIGKILL)
        rest = child.stdout.read()
    finally:
        child.kill()
        child.wait(10)
    handed = 12 + rest.count("handed")
    events = read_timeline(folder)
    listed = [e for e in events if e["kind"] == "audio"]
    assert handed - len(listed) <= 1, (handed, len(listed))
    for e in listed:  # listed means complete
        data, rate = soundfile.read(folder / e["file"], dtype="float32")
        assert rate == 16000 and abs(data.size / rate - e["duration"]) < 1e-3
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["ended_at"] is None and meta["type"] == "call"  # the viewer opens it as unfinished
    assert not any(e["kind"] == "end" for e in events)
    assert len([e for e in events if e["kind"] == "turn_metrics"]) > 100
