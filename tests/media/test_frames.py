"""The frame ring: whole 20 ms frames from chunks of any size, timestamps per frame, levels, and
a slow reader that loses the oldest frames (counted) but never a torn one."""

import threading

import numpy as np
import pytest

from desktop.media.frames import FRAME_SAMPLES, SAMPLE_RATE, SILENCE_DB, FrameRing, level_db


def test_chunks_of_any_size_become_whole_frames_stamped_at_their_first_sample():
    ring = FrameRing(capacity=50)
    x = np.arange(1000, dtype=np.float32)
    # 3 chunks of odd sizes; chunk k starts at sample s_k, captured at 10.0 + s_k / 16000.
    for lo, hi in [(0, 100), (100, 421), (421, 1000)]:
        ring.write(x[lo:hi], 10.0 + lo / SAMPLE_RATE)
    f = ring.read()
    assert f.samples.shape == (3, FRAME_SAMPLES) and f.samples.dtype == np.float32
    assert np.array_equal(f.audio(), x[:960])  # the last 40 samples wait for more
    assert np.allclose(f.times, 10.0 + np.array([0, 320, 640]) / SAMPLE_RATE, atol=1e-12)
    assert len(ring.read()) == 0
    ring.write(np.ones(280, np.float32), 10.0 + 1000 / SAMPLE_RATE)  # completes the 4th frame
    f = ring.read()
    assert len(f) == 1 and f.times[0] == pytest.approx(10.0 + 960 / SAMPLE_RATE)


@pytest.mark.parametrize("amp", [1.0, 0.5, 0.1, 0.001])
def test_level_is_rms_dbfs_of_each_frame(amp):
    t = np.arange(FRAME_SAMPLES) / SAMPLE_RATE
    sine = (amp * np.sin(2 * np.pi * 1000 * t)).astype(np.float32)  # 20 whole periods
    ring = FrameRing(capacity=8)
    ring.write(np.concatenate([sine, np.zeros(FRAME_SAMPLES, np.float32)]), 0.0)
    f = ring.read()
    assert f.levels[0] == pytest.approx(20 * np.log10(amp / np.sqrt(2)), abs=0.01)
    assert f.levels[1] == SILENCE_DB
    assert level_db(np.full(10, 0.5, np.float32)) == pytest.approx(-6.0206, abs=1e-3)


def test_slow_reader_loses_the_oldest_frames_and_counts_them():
    ring = FrameRing(capacity=10)
    for k in range(25):  # frame k is all k
        ring.write(np.full(FRAME_SAMPLES, k, np.float32), k * 0.02)
    assert ring.pending == 9
    f = ring.read()
    assert [int(v) for v in f.samples[:, 0]] == list(range(16, 25))  # the newest capacity-1
    assert ring.overflows == 16
    assert np.allclose(f.times, np.arange(16, 25) * 0.02)
    ring.write(np.full(FRAME_SAMPLES, 99, np.float32), 1.0)
    assert ring.read(max_frames=5).samples[:, 0].tolist() == [99] and ring.overflows == 16


class _LappingSamples(np.ndarray):
    """The ring's sample store; reading it lets the writer run `laps` frames first, as a writer
    thread could while the reader copies."""

    def __getitem__(self, idx):
        hook, self.hook = getattr(self, "hook", None), None
        if hook is not None:
            hook()
        return super().__getitem__(idx)


def test_frames_the_writer_overwrites_during_a_read_are_dropped_and_counted():
    ring = FrameRing(capacity=4)

    def frame(k: int) -> None:
        ring.write(np.full(FRAME_SAMPLES, k, np.float32), float(k))

    for k in range(3):
        frame(k)
    ring._samples = ring._samples.view(_LappingSamples)
    ring._samples.hook = lambda: [frame(k) for k in range(3, 6)]  # laps slots 0 and 1
    f = ring.read()
    stamps = f.times.tolist()
    assert stamps == sorted(stamps) and all((row == t).all() for row, t in zip(f.samples, stamps))
    assert ring.overflows == 3 - len(f)  # whatever was dropped is counted
    f2 = ring.read()
    assert f2.times.tolist() == [3.0, 4.0, 5.0] and ring.overflows == 3 - len(f)


def test_read_waits_for_a_frame_up_to_the_timeout():
    ring = FrameRing(capacity=8)
    threading.Timer(0.05, ring.write, (np.zeros(FRAME_SAMPLES, np.float32), 0.0)).start()
    assert len(ring.read(timeout=2.0)) == 1
    assert len(ring.read(timeout=0.01)) == 0
