"""The session recorder on a virtual clock: the documented folder (format v1), chunks complete
before they are listed, a full or unwritable disk → one plain warning and no exception, a slow
disk never blocks the caller."""

from __future__ import annotations

import errno
import json
import threading
import time

import cv2
import numpy as np
import soundfile
from helpers import FullDisk

from desktop.media.clock import VirtualClock
from desktop.recording.chunker import AudioChunker
from desktop.recording.disk import Disk
from desktop.recording.paths import FOLDER
from desktop.recording.replay import read_timeline
from desktop.recording.writer import SessionRecorder, live_folders


def tone(n: int, freq: float, rate: int, amp: float = 0.3) -> np.ndarray:
    return (amp * np.sin(2 * np.pi * freq * np.arange(n) / rate)).astype(np.float32)


def record_a_session(rec: SessionRecorder, clock: VirtualClock, seconds: float = 3.2) -> None:
    """20 ms of microphone and speaker per step; the speaker sounds from 1.0 s to 2.0 s only."""
    user = AudioChunker(lambda b, s, r: rec.audio("user", b, rec.at(s), r), 16000)
    ai = AudioChunker(lambda b, s, r: rec.audio("ai", b, rec.at(s), r), 48000, gated=True)
    for i in range(int(seconds / 0.02)):
        t = clock.now()
        user.feed(tone(320, 300, 16000), t)
        ai.feed(tone(960, 600, 48000) if 1.0 <= rec.at(t) < 2.0 else np.zeros(960, np.float32), t)
        if i % 25 == 0:
            rec.frame(np.full((32, 48, 3), (40 + i) % 256, np.uint8), rec.at(t))
        if i == 10:
            rec.event("user_text", text="  What is   the weather like today?  ", turn=1)
        clock.advance(0.02)
    user.flush()
    ai.flush()


def test_a_session_folder_has_the_documented_files(tmp_path):
    clock = VirtualClock()
    rec = SessionRecorder(tmp_path, "call", model="tiny", settings={"call_mode": "duplex"}, ai_rate=24000,
                          video=True, clock=clock)
    assert rec.folder in live_folders()
    record_a_session(rec, clock)
    png = cv2.imencode(".png", np.zeros((4, 4, 3), np.uint8))[1].tobytes()
    rec.image(png, 1, name="photo of me.png")
    assert rec.close().result(10) is rec
    assert rec.folder not in live_folders()

    assert FOLDER.match(rec.folder.name) and rec.folder.name.split("-")[2] == "call"
    meta = json.loads((rec.folder / "meta.json").read_text())
    assert meta["version"] == 1 and meta["type"] == "call" and meta["id"].startswith(rec.folder.name[-8:])
    assert meta["ended_at"] is not None and meta["ended_at"] - meta["started_at"] >= 3.2 - 1e-6
    assert meta["first_words"] == "What is the weather like today?"
    assert (meta["user_rate"], meta["ai_rate"], meta["video"], meta["model"]) == (16000, 24000, True, "tiny")
    assert meta["settings"] == {"call_mode": "duplex"} and meta["replay"] == {"audio": None, "video": None}

    events = read_timeline(rec.folder)
    assert all(isinstance(e["t"], float | int) and "kind" in e for e in events)
    assert events[-1]["kind"] == "end"
    audio = [e for e in events if e["kind"] == "audio"]
    user = [e for e in audio if e["track"] == "user"]
    ai = [e for e in audio if e["track"] == "ai"]
    assert [e["file"] for e in user] == [f"user_audio/{i:06d}.wav" for i in range(1, 4)]
    assert all(1.0 <= e["duration"] <= 2.0 for e in user[:-1])
    assert abs(sum(e["duration"] for e in user) - 3.2) < 1e-3
    for e in audio:
        data, rate = soundfile.read(rec.folder / e["file"], dtype="float32")
        info = soundfile.info(rec.folder / e["file"])
        assert info.channels == 1 and info.subtype == "PCM_16" and rate == e["rate"]
        assert abs(data.size / rate - e["duration"]) < 1e-3
    assert {e["rate"] for e in user} == {16000} and {e["rate"] for e in ai} == {24000}
    # the speaker's silence is not recorded: its chunks cover 1.0–2.0 s only
    assert ai and abs(ai[0]["start"] - 1.0) < 0.021 and ai[-1]["start"] + ai[-1]["duration"] <= 2.03
    frames = [e for e in events if e["kind"] == "frame"]
    assert len(frames) == 7 and [f["start"] for f in frames][:2] == [0.0, 0.5]
    assert cv2.imread(str(rec.folder / frames[1]["file"])).shape == (32, 48, 3)
    image = next(e for e in events if e["kind"] == "image")
    assert image["file"] == "user_images/001-photo_of_me.png" and (rec.folder / image["file"]).read_bytes() == png
    assert not list(rec.folder.rglob("*.part"))


def test_a_full_disk_stops_the_recording_with_one_plain_warning(tmp_path):
    clock = VirtualClock()
    warnings: list[str] = []
    disk = FullDisk(room=4)  # meta.json, then three files
    rec = SessionRecorder(tmp_path, "call", clock=clock, on_warning=warnings.append, disk=disk)
    record_a_session(rec, clock, seconds=6.0)  # never raises, whatever the disk does
    rec.event("user_text", text="more", turn=2)
    rec.close().result(10)
    assert len(warnings) == 1 and warnings[0] == rec.failed
    assert "disk is full" in warnings[0] and "call goes on" in warnings[0]
    assert not rec.recording
    # what was written before is whole and listed (the lines before the disk filled up)
    for e in read_timeline(rec.folder):
        if e["kind"] in ("audio", "frame"):
            assert (rec.folder / e["file"]).stat().st_size > 0


def test_an_unwritable_folder_is_a_warning_not_an_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    warnings: list[str] = []
    rec = SessionRecorder(blocker / "recordings", "chat", on_warning=warnings.append)
    rec.event("user_text", text="hi", turn=1)
    rec.audio("user", [np.zeros(1600, np.float32)], 0.0, 16000)
    rec.close().result(10)
    assert len(warnings) == 1 and warnings[0].startswith("Recording stopped:") and "chat goes on" in warnings[0]

    denied: list[str] = []
    rec = SessionRecorder(tmp_path, "call", disk=FullDisk(room=0, err=errno.EACCES), on_warning=denied.append)
    rec.close().result(10)
    assert denied == [rec.failed] and "cannot be written to" in denied[0]


class SlowDisk(Disk):
    """Every file write waits until the test opens the gate."""

    def __init__(self) -> None:
        self.gate = threading.Event()

    def write_file(self, path, data) -> None:
        if path.suffix == ".wav":
            self.gate.wait(10)
        super().write_file(path, data)


def test_a_slow_disk_never_blocks_the_caller_and_drops_beyond_its_budget(tmp_path):
    disk = SlowDisk()
    rec = SessionRecorder(tmp_path, "call", disk=disk, max_pending=200_000)  # ~1.5 s of 16 kHz float32 chunks
    block = tone(24000, 200, 16000)
    start = time.perf_counter()
    for i in range(10):
        rec.audio("user", [block], i * 1.5, 16000)
    assert time.perf_counter() - start < 0.05  # queued, not written
    disk.gate.set()
    rec.close().result(10)
    events = read_timeline(rec.folder)
    listed = [e for e in events if e["kind"] == "audio"]
    assert 1 <= len(listed) < 10
    assert sum("fell behind the disk" in e.get("text", "") for e in events) == 1  # said once per stretch


def test_a_torn_last_line_is_skipped(tmp_path):
    (tmp_path / "timeline.jsonl").write_text('{"t": 0.1, "kind": "user_text", "text": "hi"}\n{"t": 0.2, "ki')
    assert read_timeline(tmp_path) == [{"t": 0.1, "kind": "user_text", "text": "hi"}]
