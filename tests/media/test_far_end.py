"""The far-end reference: the speaker's on_played tap hands out every block with its clock time,
and FarEndReference gives back what played at a clock time, at 16 kHz, silence elsewhere."""

import numpy as np
import pytest
import soxr

from desktop.media.clock import VirtualClock
from desktop.media.fake_audio import FakeAudioOutput
from desktop.media.far_end import RESYNC_S, FarEndReference

T0 = 50.0


def chirp(rate: int, seconds: float) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return (0.5 * np.sin(2 * np.pi * (200 + 1500 * t) * t)).astype(np.float32)


def playing(device_rate: int = 48000, seconds: float = 1.0, **kw):
    clock = VirtualClock(start=T0)
    sp = FakeAudioOutput(clock, device_rate=device_rate, **kw)
    ref = FarEndReference.tap(sp)
    sp.start()
    sp.write("a", chirp(device_rate, seconds), device_rate)
    sp.end("a")
    return clock, sp, ref


def test_speaker_hands_every_rendered_block_and_its_time_to_on_played():
    clock, sp, _ = playing(volume=0.5)
    seen: list[tuple[np.ndarray, float]] = []
    sp.on_played.append(lambda block, t: seen.append((block.copy(), t)))
    clock.advance(0.5)
    sp.pump()
    assert len(seen) == len(sp.blocks()) == 26  # blocks starting at 0, 20, ..., 500 ms
    assert [t for _, t in seen] == pytest.approx(T0 + 0.02 * np.arange(26))
    for (block, _), played in zip(seen, sp.blocks()):
        np.testing.assert_array_equal(block, played)  # after volume: what was really played
    assert 0 < max(np.abs(b).max() for b, _ in seen) <= 0.25 + 1e-6


@pytest.mark.parametrize("device_rate", [48000, 44100, 16000])
def test_read_gives_what_played_at_that_clock_time(device_rate):
    clock, sp, ref = playing(device_rate)
    clock.advance(1.5)
    sp.pump()
    want = soxr.resample(sp.played(), device_rate, 16000, quality="LQ")
    got, complete = ref.read(T0 + 0.3, 4800)  # 300..600 ms: inside the chirp
    assert complete
    np.testing.assert_allclose(got, want[4800:9600], atol=1e-4)
    assert np.abs(got).max() > 0.3
    before, complete = ref.read(T0 - 0.1, 3200)  # 100 ms before the speaker started, and after
    assert complete
    assert not before[:1600].any()
    np.testing.assert_allclose(before[1600:], want[:1600], atol=1e-4)


def test_read_past_what_played_is_silent_and_not_complete():
    clock, sp, ref = playing()
    assert ref.read(T0, 320) == (pytest.approx(np.zeros(320)), False)  # nothing played yet
    assert not ref.started
    clock.advance(0.2)
    sp.pump()
    _, complete = ref.read(T0 + 0.1, 320)
    assert complete and ref.started
    tail, complete = ref.read(T0 + 0.5, 320)
    assert not complete and not tail.any()


def test_stamp_jitter_keeps_blocks_back_to_back_and_a_gap_starts_a_new_segment():
    ref = FarEndReference(16000, block_frames=320)
    tone = chirp(16000, 0.2)
    for k in range(10):  # 20 ms blocks stamped up to ±3 ms off: a device callback's jitter
        ref.on_played(tone[k * 320 : (k + 1) * 320], 1.0 + 0.02 * k + (0.003 if k % 2 else -0.002))
    got, _ = ref.read(1.0 - 0.002, 3200)
    np.testing.assert_array_equal(got, tone)
    assert ref.resyncs == 0
    ref.on_played(tone[:320], 1.2 + RESYNC_S * 2)  # the stream stopped and came back
    gap = int(round((RESYNC_S * 2 + 0.002) * 16000))  # the first segment ended at 1.198
    got, complete = ref.read(1.2 - 0.002, gap + 320)
    assert complete and ref.resyncs == 1
    assert not got[:gap].any()
    np.testing.assert_array_equal(got[gap : gap + 320], tone[:320])


def test_a_reader_too_far_behind_loses_the_oldest_blocks_and_counts_them():
    ref = FarEndReference(16000, block_frames=320, capacity_s=0.2)  # 10 rows
    for k in range(25):
        ref.on_played(np.full(320, 0.1, np.float32), 2.0 + 0.02 * k)
    got, complete = ref.read(2.0 + 0.02 * 20, 320)
    assert complete and ref.lost_blocks == 16  # 9 rows kept: the one being written is not safe
    np.testing.assert_allclose(got, 0.1)


def test_long_blocks_are_split_into_rows():
    ref = FarEndReference(16000, block_frames=160)
    tone = chirp(16000, 0.1)
    ref.on_played(tone, 3.0)  # 1600 samples, 10 rows
    got, complete = ref.read(3.0, 1600)
    assert complete
    np.testing.assert_array_equal(got, tone)


def test_a_reader_a_little_ahead_of_the_speaker_waits_for_it_but_not_for_a_stopped_one():
    import threading
    import time

    ref = FarEndReference(16000, block_frames=320)
    ref.on_played(np.full(320, 0.5, np.float32), 0.0)  # [0, 20 ms) played
    late = threading.Timer(0.01, lambda: ref.on_played(np.full(320, 0.25, np.float32), 0.02))
    late.start()  # the speaker's next block comes 10 ms after the microphone asks for it
    got, complete = ref.read_waiting(0.02, 320, wait_s=0.05)
    assert complete and np.allclose(got, 0.25)
    started = time.monotonic()
    got, complete = ref.read_waiting(1.0, 320, wait_s=0.05)  # far past the last block: stopped
    assert not complete and not got.any() and time.monotonic() - started < 0.02
    got, complete = ref.read_waiting(0.04, 320, wait_s=0.03)  # just behind, but nothing comes
    assert not complete
