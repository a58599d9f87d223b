"""The reader on recordings written by the spec (not by the recorder): tracks at their start times
with silence between, frames, turns with barge-in and metrics, and crashed recordings."""

from __future__ import annotations

import json

import numpy as np
import pytest

from recording_samples import AI_RATE, USER_RATE, SampleRecording, sample_call, sample_chat, tone
from desktop.recording.reader import RecordingError, open_recording


def test_call_tracks_frames_and_turns(tmp_path):
    rec = open_recording(sample_call(tmp_path).folder)
    assert rec.kind == "call" and rec.complete and rec.problems == []
    assert rec.user.rate == USER_RATE and rec.ai.rate == AI_RATE
    user = rec.user.samples()
    assert len(user) == pytest.approx(4.2 * USER_RATE, abs=2)
    # speech 0–1.5 s and 3.2–4.2 s, silence between
    assert np.abs(user[: int(1.4 * USER_RATE)]).max() > 0.4
    assert np.abs(user[int(1.6 * USER_RATE): int(3.1 * USER_RATE)]).max() == 0
    assert np.abs(user[int(3.3 * USER_RATE):]).max() > 0.4
    ai = rec.ai.read(1.0, 2.5)
    assert np.abs(ai[: int(0.95 * AI_RATE)]).max() == 0 and np.abs(ai[int(1.05 * AI_RATE):]).max() > 0.4
    assert rec.duration == pytest.approx(6.0)
    assert [f.path.name for f in rec.frames] == [f"{i:06d}.jpg" for i in range(1, 7)]
    assert rec.barge_ins == [3.2]
    one, two = rec.turns
    assert (one.user_text, one.heard, one.barge_in_t, one.latency_ms) == ("hello there", "Hi!", 3.2, 412.0)
    assert one.assistant_text.startswith("Hi! How can I help")
    assert (two.user_text, two.assistant_text, two.latency_ms) == ("what time is it", "It is noon.", 233.0)
    assert rec.turn_at(0.1) is None and rec.turn_at(0.2) == 0 and rec.turn_at(4.0) == 0 and rec.turn_at(4.3) == 1
    assert rec.frame_at(2.5) == 2 and rec.frame_at(59) == 5


def test_peaks_follow_the_audio(tmp_path):
    rec = open_recording(sample_call(tmp_path, video=False).folder)
    mins, maxs = rec.ai.peaks(100)
    assert len(maxs) == pytest.approx(550, abs=2)
    assert maxs[:195].max() == 0 and maxs[210:310].min() > 0.4 and mins[210:310].max() < -0.4
    assert maxs[330:440].max() == 0


def test_chat_turns_without_audio(tmp_path):
    rec = open_recording(sample_chat(tmp_path).folder)
    assert rec.kind == "chat" and rec.user.empty and rec.ai.empty and rec.frames == []
    assert [t.user_text for t in rec.turns] == ["Plan a weekend in Lisbon", "Where should I eat?", "And on a budget?"]
    assert rec.turns[2].latency_ms == 53.0 and rec.duration == 40.0
    assert [p.name for p in rec.turns[0].images] == ["map.png"] and rec.turns[1].images == []


def test_crashed_recording_opens_with_what_was_written(tmp_path):
    sample = sample_call(tmp_path, finish=False)
    # a chunk being written when the app died: on disk as .part, never listed
    (sample.folder / "ai_audio" / "000003.wav.part").write_bytes(b"RIFF")
    (sample.folder / "user_audio" / "000099.wav").write_bytes(b"unlisted")
    sample.crash()
    rec = open_recording(sample.folder)
    assert not rec.complete and json.loads((sample.folder / "meta.json").read_text())["ended_at"] is None
    assert len(rec.turns) == 2 and len(rec.ai.chunks) == 2 and len(rec.user.chunks) == 2
    assert rec.problems == ["the last timeline entry was cut short (skipped)"]
    assert rec.duration == pytest.approx(5.5)  # the last complete event


def test_listed_chunk_that_is_gone_or_unsafe_is_skipped(tmp_path):
    sample = SampleRecording(tmp_path)
    path = sample.audio("user", 0.0, tone(1.0, USER_RATE, 300), USER_RATE)
    sample.event(2.0, "audio", track="user", file="../../etc/passwd", start=1.0, duration=1.0, rate=16000)
    sample.event(2.0, "audio", track="ai", file="ai_audio/000001.wav", start=1.0, duration=1.0, rate=22050)
    path.with_name("000002.wav").write_bytes(b"not a wav")
    sample.event(3.0, "audio", track="user", file="user_audio/000002.wav", start=1.0, duration=1.0, rate=16000)
    rec = open_recording(sample.folder)
    assert len(rec.user.chunks) == 2 and rec.ai.empty and len(rec.problems) == 2
    data = rec.user.samples()  # the undecodable chunk reads as silence
    assert np.abs(data[: USER_RATE - 10]).max() > 0.4 and np.abs(data[USER_RATE + 10:]).max() == 0


def test_unreadable_meta_falls_back_to_the_folder_name(tmp_path):
    sample = sample_chat(tmp_path)
    (sample.folder / "meta.json").write_text("{torn")
    rec = open_recording(sample.folder)
    assert rec.kind == "chat" and len(rec.turns) == 3 and rec.problems
    assert rec.started_at == pytest.approx(sample.started_at, abs=1)


def test_not_a_recording(tmp_path):
    with pytest.raises(RecordingError, match="not a recording"):
        open_recording(tmp_path)
    (tmp_path / "meta.json").write_text(json.dumps({"version": 9, "type": "call"}))
    with pytest.raises(RecordingError, match="newer"):
        open_recording(tmp_path)


def test_corrupt_times_are_skipped_not_trusted(tmp_path):
    sample = SampleRecording(tmp_path)
    sample.audio("user", 0.0, tone(1.0, USER_RATE, 300), USER_RATE)
    sample.event(float("nan"), "note", text="nan")
    sample.event(1e12, "user_text", text="far", turn=1)
    sample.event(-5, "user_text", text="before", turn=1)
    sample.event(2.0, "audio", track="user", file="user_audio/000001.wav", start=1e12, duration=1.0, rate=16000)
    sample.event(2.0, "audio", track="user", file="user_audio/000001.wav", start=1.0, duration=1.0, rate=0)
    rec = open_recording(sample.folder)
    assert rec.duration == 2.0 and rec.turns == [] and len(rec.user.chunks) == 1
    assert len(rec.problems) == 5 and sum("no valid start" in p for p in rec.problems) == 2
    assert rec.user.peaks()[1].size == 100


def test_meta_only_recording(tmp_path):
    rec = open_recording(SampleRecording(tmp_path).folder)  # the app stopped right after starting
    assert rec.duration == 0.0 and rec.turns == [] and rec.user.samples().size == 0 and not rec.complete
