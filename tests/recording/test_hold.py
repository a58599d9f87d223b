"""The recorder keeps off a call's reply: its writer pool is held from the end of the user's speech
to the reply's first audio (bounded in time; an audio chunk ends it, one frame may wait), and the
chunker copies device blocks into one buffer per chunk."""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np

from desktop.call.state import CallPhase
from desktop.recording.call_hook import CallRecording
from desktop.recording.chunker import AudioChunker
from desktop.recording.lanes import Gate, WriterPool
from desktop.recording.paths import TIMELINE
from desktop.recording.replay import read_timeline
from desktop.recording.writer import SessionRecorder


def ran_by(lane, seconds: float) -> bool:
    return lane.wait(seconds)


def test_a_held_pool_starts_no_job_until_released():
    pool = WriterPool()
    lane, done = pool.lane(), []
    pool.hold(30)
    lane.submit(done.append, 1)
    lane.submit(done.append, 2)
    time.sleep(0.2)
    assert done == [] and pool.gate.held
    pool.release()
    assert ran_by(lane, 5) and done == [1, 2]  # in order, once released
    pool.shutdown()


def test_a_hold_ends_by_itself_and_is_never_extended():
    pool = WriterPool()
    lane, done = pool.lane(), []
    start = time.monotonic()
    pool.hold(0.3)
    lane.submit(lambda: done.append(time.monotonic() - start))
    time.sleep(0.1)
    pool.hold(30)  # already held: the first bound stands
    assert ran_by(lane, 5)
    assert 0.25 <= done[0] < 2.0 and not pool.gate.held
    pool.shutdown()


def test_a_hold_that_ran_out_unnoticed_does_not_block_the_next_one():
    now = [0.0]
    gate = Gate(clock=lambda: now[0])
    gate.hold(1.5)
    now[0] = 2.0  # no writer looked: the gate still reads closed, but the hold is over
    assert not gate.held
    gate.hold(1.5)
    assert gate.held and gate.holds == 2


def test_while_held_one_frame_may_wait_but_an_audio_chunk_is_written_at_once(tmp_path):
    pool = WriterPool()
    rec = SessionRecorder(tmp_path, "call", pool=pool)
    chunk = (0.2 * np.sin(np.arange(16000) / 5)).astype(np.float32)
    rec.hold(30)
    rec.frame(np.zeros((8, 8, 3), np.uint8), 0.0)
    time.sleep(0.3)
    assert pool.gate.held and not list((rec.folder / "user_frames").iterdir())  # the frame waits
    rec.audio("user", [chunk], 0.0, 16000)  # an audio chunk never waits: the writers run now
    assert not pool.gate.held
    rec.close().result(10)
    kinds = [e["kind"] for e in read_timeline(rec.folder)]
    assert kinds.count("audio") == 1 and kinds.count("frame") == 1
    pool.shutdown()


class Speaker:
    """What a call recording taps: the Voice's (or a sink's) `tap` and its device rate."""

    device_rate = 48000

    def __init__(self) -> None:
        self.on_played: list = []

    def tap(self, fn):
        self.on_played.append(fn)
        return lambda: self.on_played.remove(fn)


def call_and_speaker():
    return SimpleNamespace(listeners=[], frame_taps=[]), Speaker()


def phase(p: CallPhase) -> SimpleNamespace:
    return SimpleNamespace(kind="phase", phase=p, text="", metrics=None)


def test_a_call_holds_the_writes_from_end_of_speech_to_first_audio(tmp_path):
    pool = WriterPool()
    rec = SessionRecorder(tmp_path, "call", pool=pool)
    recording = CallRecording(rec)
    call, speaker = call_and_speaker()
    recording.attach(call, speaker)
    on_event = call.listeners[0]
    on_event(phase(CallPhase.USER_SPEAKING))
    assert not pool.gate.held
    on_event(phase(CallPhase.TRANSCRIBING))
    on_event(SimpleNamespace(kind="user", text="Hello there", phase=None, metrics=None))
    on_event(phase(CallPhase.THINKING))
    time.sleep(0.2)
    assert pool.gate.held and pool.gate.holds == 1  # THINKING keeps the one hold
    assert "Hello there" not in (rec.folder / TIMELINE).read_text()  # the line waits
    on_event(phase(CallPhase.SPEAKING))  # the reply's first audio is queued for the speaker
    speaker.on_played[0](np.zeros(960, np.float32), 1.0)  # its pre-roll: nothing heard yet
    assert pool.gate.held
    speaker.on_played[0](np.full(960, 0.2, np.float32), 1.02)  # heard
    assert not pool.gate.held
    assert rec._timeline.wait(5) and "Hello there" in (rec.folder / TIMELINE).read_text()  # noqa: SLF001
    on_event(phase(CallPhase.TRANSCRIBING))  # the next turn; the call ends before its reply
    assert pool.gate.held
    recording.finish().result(10)
    assert not pool.gate.held
    pool.shutdown()


def test_without_a_speaker_the_hold_ends_when_the_reply_starts(tmp_path):
    pool = WriterPool()
    recording = CallRecording(SessionRecorder(tmp_path, "call", pool=pool))
    call, _ = call_and_speaker()
    recording.attach(call, None)
    call.listeners[0](phase(CallPhase.THINKING))
    assert pool.gate.held
    call.listeners[0](phase(CallPhase.SPEAKING))
    assert not pool.gate.held
    recording.finish().result(10)
    pool.shutdown()


def test_a_recording_with_no_hold_never_holds(tmp_path):
    pool = WriterPool()
    recording = CallRecording(SessionRecorder(tmp_path, "call", pool=pool), hold_s=0)
    call, speaker = call_and_speaker()
    recording.attach(call, speaker)
    call.listeners[0](phase(CallPhase.TRANSCRIBING))
    assert not pool.gate.held and pool.gate.holds == 0
    recording.finish().result(10)
    pool.shutdown()


def test_the_chunker_hands_over_each_chunk_whole_and_never_reuses_its_buffer():
    got: list[tuple[np.ndarray, float]] = []
    chunker = AudioChunker(lambda blocks, start, rate: got.append((blocks[0], start)), 1000, chunk_s=0.1)
    for i in range(25):  # 10-sample blocks, each its own value
        chunker.feed(np.full(10, i, np.float32), i * 0.01)
    chunker.feed(np.full(500, 99, np.float32), 0.25)  # bigger than a chunk and its slack: the buffer grows
    chunker.flush()
    assert [start for _, start in got] == [0.0, 0.1, 0.2]
    assert np.array_equal(got[0][0], np.repeat(np.arange(10, dtype=np.float32), 10))
    assert np.array_equal(got[1][0], np.repeat(np.arange(10, 20, dtype=np.float32), 10))  # not overwritten
    assert np.array_equal(got[2][0], np.concatenate([np.repeat(np.arange(20, 25, dtype=np.float32), 10),
                                                     np.full(500, 99, np.float32)]))


def test_a_gated_chunker_leaves_out_silence_and_its_trailing_gap():
    got: list[tuple[np.ndarray, float]] = []
    chunker = AudioChunker(lambda blocks, start, rate: got.append((blocks[0], start)), 1000, gated=True, gap_s=0.05)
    quiet, loud = np.zeros(10, np.float32), np.full(10, 0.5, np.float32)
    tiny = np.full(10, 5e-5, np.float32)  # not exact zeros, still silence
    blocks = [quiet, tiny, loud, loud, quiet, tiny, quiet, quiet, quiet, quiet, tiny]
    heard = [chunker.feed(block, i * 0.01) for i, block in enumerate(blocks)]
    assert heard == [block is loud for block in blocks]  # what ends a writers' hold
    chunker.flush()
    assert len(got) == 1 and got[0][1] == 0.02 and np.array_equal(got[0][0], np.full(20, 0.5, np.float32))
