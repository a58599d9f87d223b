"""Jitter buffer: ring wrap-around, pre-roll gating, underruns, flush within one read, high water,
and the stream staying intact under any interleaving of writer and reader."""

import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from desktop.media.jitter import JitterBuffer

RATE = 1000  # 1 sample per ms keeps the arithmetic readable


def ramp(start: int, n: int) -> np.ndarray:
    return np.arange(start, start + n, dtype=np.float32)


def test_wraps_around_and_keeps_order():
    jb = JitterBuffer(RATE, capacity_s=0.05, pre_roll_ms=0)  # 50-sample ring
    got, n = [], 0
    for _ in range(7):  # 7 × 30 samples through a 50-sample ring
        assert jb.write(ramp(n, 30)) == 30
        n += 30
        got.append(jb.read(30))
    assert np.array_equal(np.concatenate(got), ramp(0, 210))
    assert jb.underruns == 0


def test_write_takes_only_what_fits():
    jb = JitterBuffer(RATE, capacity_s=0.05, pre_roll_ms=0)
    assert jb.write(ramp(0, 80)) == 50
    assert jb.free == 0 and jb.write(ramp(0, 5)) == 0
    jb.read(20)
    assert jb.write(ramp(50, 30)) == 20


def test_pre_roll_gates_playback_until_enough_is_buffered():
    jb = JitterBuffer(RATE, pre_roll_ms=100)
    jb.write(ramp(1, 60))
    assert not jb.read(20).any() and jb.read_pos == 0  # silence, nothing consumed
    assert jb.underruns == 0
    jb.write(ramp(61, 40))
    assert np.array_equal(jb.read(20), ramp(1, 20))


def test_end_opens_the_gate_for_a_short_tail_without_underrun():
    jb = JitterBuffer(RATE, pre_roll_ms=100)
    jb.write(ramp(1, 30))
    jb.end()
    out = jb.read(50)
    assert np.array_equal(out[:30], ramp(1, 30)) and not out[30:].any()
    assert jb.underruns == 0 and not jb.playing


def test_underrun_plays_silence_counts_once_and_waits_for_pre_roll_again():
    jb = JitterBuffer(RATE, pre_roll_ms=40)
    jb.write(ramp(1, 50))
    jb.read(40)
    out = jb.read(20)  # only 10 left
    assert np.array_equal(out[:10], ramp(41, 10)) and not out[10:].any()
    assert jb.underruns == 1
    jb.read(20)  # still dry, but waiting for pre-roll: not another underrun
    jb.write(ramp(51, 30))
    assert not jb.read(20).any() and jb.underruns == 1
    jb.write(ramp(81, 10))
    assert np.array_equal(jb.read(20), ramp(51, 20))


def test_flush_takes_effect_at_the_next_read():
    jb = JitterBuffer(RATE, pre_roll_ms=0)
    jb.write(ramp(1, 100))
    jb.read(20)
    jb.flush()
    assert not jb.read(20).any()
    assert jb.underruns == 0 and jb.buffered == 0
    jb.write(ramp(200, 10))
    jb.end()
    assert np.array_equal(jb.read(10), ramp(200, 10))


def test_flush_of_a_range_skips_only_that_range():
    jb = JitterBuffer(RATE, pre_roll_ms=0)
    jb.write(ramp(0, 30))  # request A: positions 0..29
    jb.write(ramp(100, 30))  # request B: positions 30..59
    jb.write(ramp(200, 30))  # request C: positions 60..89
    jb.flush(30, 60)
    out = jb.read(60)
    assert np.array_equal(out, np.concatenate([ramp(0, 30), ramp(200, 30)]))
    assert jb.underruns == 0


def test_flush_of_the_playing_range_mid_read():
    jb = JitterBuffer(RATE, pre_roll_ms=0)
    jb.write(ramp(0, 50))
    jb.read(10)
    jb.flush(0, 50)
    jb.write(ramp(100, 20))
    assert np.array_equal(jb.read(20), ramp(100, 20))


def test_high_water_and_buffered_ms():
    jb = JitterBuffer(RATE, capacity_s=1, pre_roll_ms=0, high_water_ms=200)
    jb.write(np.zeros(200, np.float32))
    assert jb.buffered_ms == pytest.approx(200) and not jb.above_high_water
    jb.write(np.zeros(1, np.float32))
    assert jb.above_high_water


def test_read_into_does_not_allocate_a_new_buffer():
    jb = JitterBuffer(RATE, pre_roll_ms=0)
    jb.write(ramp(0, 10))
    out = np.full(16, 9, np.float32)
    assert jb.read_into(out) == 10
    assert np.array_equal(out[:10], ramp(0, 10)) and not out[10:].any()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 70), st.integers(1, 40)), min_size=1, max_size=40))
def test_any_interleaving_of_writes_and_reads_keeps_the_stream(ops):
    jb = JitterBuffer(RATE, capacity_s=0.064, pre_roll_ms=0)  # 64-sample ring
    sent = got = 0
    for w, r in ops:
        sent += jb.write(ramp(sent, w))
        out = np.empty(r, np.float32)
        k = jb.read_into(out)
        assert np.array_equal(out[:k], ramp(got, k)) and not out[k:].any()
        got += k
    assert jb.buffered == sent - got


def test_concurrent_writer_and_reader_threads():
    jb = JitterBuffer(RATE, capacity_s=0.5, pre_roll_ms=0)
    total, rng = 200_000, np.random.default_rng(0)
    received: list[np.ndarray] = []

    def reader():
        out = np.empty(97, np.float32)
        n = 0
        while n < total:
            k = jb.read_into(out)
            received.append(out[:k].copy())
            n += k
            if not k:
                time.sleep(0)  # yield the GIL instead of spinning a whole switch interval

    t = threading.Thread(target=reader)
    t.start()
    sent = 0
    while sent < total:
        k = jb.write(ramp(sent, min(int(rng.integers(1, 900)), total - sent)))
        sent += k
        if not k:
            time.sleep(0)
    t.join(10)
    assert np.array_equal(np.concatenate(received), ramp(0, total))
