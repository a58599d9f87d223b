"""Microphone frames: fixed 20 ms frames of 16 kHz mono float32, each with the clock time of its
first sample and its level, in a preallocated ring shared by the real and the fake microphone."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

SAMPLE_RATE = 16000
FRAME_SAMPLES = 320  # 20 ms at 16 kHz: two 10 ms blocks for webrtc AEC; silero-vad re-chunks to 512
FRAME_S = FRAME_SAMPLES / SAMPLE_RATE
SILENCE_DB = -100.0  # level of an all-zero frame


def level_db(frame: np.ndarray) -> float:
    """RMS level in dBFS re 1.0 (a full-scale sine reads -3.01), floored at SILENCE_DB."""
    ms = float(np.dot(frame, frame)) / max(frame.size, 1)
    return max(SILENCE_DB, 10.0 * np.log10(ms)) if ms > 0 else SILENCE_DB


@dataclass(frozen=True, slots=True)
class Frames:
    """Frames read in one go (copies, owned by the reader)."""

    samples: np.ndarray  # [n, FRAME_SAMPLES] float32
    times: np.ndarray  # [n] float64: clock time of each frame's first sample
    levels: np.ndarray  # [n] float32: RMS dBFS per frame, for a level meter

    def __len__(self) -> int:
        return len(self.times)

    def audio(self) -> np.ndarray:
        """The frames as one 1-D signal (gaps from overflows are not filled)."""
        return self.samples.reshape(-1)


class FrameRing:
    """Cuts a 16 kHz signal, written in chunks of any size, into FRAME_SAMPLES frames kept in a
    preallocated ring. One writer thread and one reader thread, no lock between them: the writer
    never waits — when the reader is more than `capacity` frames behind, the oldest frames are
    overwritten, and the reader skips and counts them (`overflows`), so it always gets the newest
    audio after a stall."""

    def __init__(self, capacity: int = 500) -> None:  # 10 s
        self.capacity = int(capacity)
        self._samples = np.zeros((self.capacity, FRAME_SAMPLES), np.float32)
        self._times = np.zeros(self.capacity, np.float64)
        self._levels = np.zeros(self.capacity, np.float32)
        self._partial = np.zeros(FRAME_SAMPLES, np.float32)
        self._fill = 0  # samples in _partial
        self._partial_t = 0.0
        self._w = 0  # frames published (writer-owned; a plain int store is atomic under the GIL)
        self._r = 0  # frames consumed or skipped (reader-owned)
        self.overflows = 0  # reader-owned
        self._ready = threading.Event()

    @property
    def written(self) -> int:
        return self._w

    @property
    def pending(self) -> int:
        """Frames waiting for the reader (at most `capacity - 1`)."""
        return min(self._w - self._r, self.capacity - 1)

    # ---- writer ------------------------------------------------------------------------------
    def write(self, chunk: np.ndarray, t: float) -> int:
        """Append 16 kHz mono samples whose first sample was captured at clock time `t`;
        returns how many whole frames were completed."""
        chunk = np.asarray(chunk, np.float32).reshape(-1)
        pos, done = 0, 0
        while pos < chunk.size:
            if self._fill == 0:
                self._partial_t = t + pos / SAMPLE_RATE
            n = min(FRAME_SAMPLES - self._fill, chunk.size - pos)
            self._partial[self._fill : self._fill + n] = chunk[pos : pos + n]
            self._fill += n
            pos += n
            if self._fill == FRAME_SAMPLES:
                self._publish()
                done += 1
        if done:
            self._ready.set()
        return done

    def _publish(self) -> None:
        i = self._w % self.capacity
        self._samples[i] = self._partial
        self._times[i] = self._partial_t
        self._levels[i] = level_db(self._partial)
        self._fill = 0
        self._w += 1  # publish last: the reader sees only complete frames

    def last_level(self) -> float:
        """Level of the newest published frame (meaningless before the first one)."""
        return float(self._levels[(self._w - 1) % self.capacity])

    # ---- reader ------------------------------------------------------------------------------
    def read(self, max_frames: int | None = None, timeout: float = 0.0) -> Frames:
        if self._w == self._r and timeout > 0:
            self._ready.clear()
            if self._w == self._r:  # re-check after clear: a write in between set it already
                self._ready.wait(timeout)
        # The writer may be filling slot w % capacity right now, so only the capacity - 1 frames
        # before w are safe to copy; older ones are lost.
        w, keep = self._w, self.capacity - 1
        if w - self._r > keep:
            self.overflows += w - self._r - keep
            self._r = w - keep
        n = w - self._r if max_frames is None else min(w - self._r, max(0, max_frames))
        idx = np.arange(self._r, self._r + n) % self.capacity
        samples, times, levels = self._samples[idx], self._times[idx], self._levels[idx]
        # Frames the writer reached while we copied are torn: frame i is overwritten by frame
        # i + capacity, which is written while _w == i + capacity.
        torn = max(0, self._w - keep - self._r)
        if torn:
            self.overflows += min(torn, n)
            samples, times, levels = samples[torn:], times[torn:], levels[torn:]
        self._r += n
        return Frames(samples, times, levels)
