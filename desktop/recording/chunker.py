"""Buffers one audio track (microphone frames, speaker blocks) into chunks of about 1.5 s for the
recorder. It runs on the device's own thread, so it only copies: each block goes into one
preallocated chunk buffer (no allocation per block; one new buffer per chunk). Encoding and disk
writes happen on the recorder's lanes."""

from __future__ import annotations

import threading
from typing import Callable

import numpy as np

CHUNK_S = 1.5
SILENT_PEAK = 1e-4  # the speaker renders exact zeros when idle; anything above is sound
GAP_S = 0.5  # a gated track ends its chunk after this much silence
SLACK_S = 0.25  # room past the chunk's length for the block that completes it (a bigger one grows it)

Emit = Callable[[list[np.ndarray], float, int], None]  # (blocks, start clock time, rate)


class AudioChunker:
    """`feed(samples, t)` with the clock time of the first sample; every `chunk_s` seconds the
    buffered samples go to `emit([samples], start, rate)`, `start` being the first block's own time
    (so each chunk is placed by the device's timestamps, never by a running sum that could drift).
    `gated`: silence is not recorded (the speaker's idle time): a chunk starts at the first
    sound and ends after `gap_s` of silence, its trailing silence left out."""

    def __init__(self, emit: Emit, rate: int, *, chunk_s: float = CHUNK_S, gated: bool = False,
                 gap_s: float = GAP_S) -> None:
        self.emit, self.rate, self.gated = emit, int(rate), gated
        self.chunk_n, self.gap_n = int(chunk_s * rate), int(gap_s * rate)
        self._size = self.chunk_n + max(1, int(SLACK_S * rate))
        self._buf: np.ndarray | None = None  # the chunk being filled (allocated at its first block)
        self._start = 0.0
        self._n = 0
        self._sound_n = 0  # samples up to the end of the last block with sound (gated)
        self._lock = threading.Lock()  # feed (device thread) against flush (whoever ends the call)

    def feed(self, samples: np.ndarray, t: float) -> bool:
        """Buffer `samples`; True when a gated chunker heard sound in them."""
        k = samples.size
        if k == 0:
            return False
        loud = False
        with self._lock:
            if self.gated:
                loud = _loud(samples)
                if not self._n and not loud:
                    return False
            n = self._n
            buf = self._buf
            if buf is None or n + k > buf.size:
                buf = self._grow(n + k)
            if n == 0:
                self._start = t
            buf[n:n + k] = samples.reshape(-1)  # the copy (a device may reuse its block)
            n = self._n = n + k
            if self.gated:
                if loud:
                    self._sound_n = n
                elif n - self._sound_n >= self.gap_n:
                    self._emit_locked()
                    return False
            if n >= self.chunk_n:
                self._emit_locked()
        return loud

    def flush(self) -> None:
        """Hand over what is buffered (the call ended)."""
        with self._lock:
            if self._n:
                self._emit_locked()

    def _grow(self, need: int) -> np.ndarray:
        buf = np.empty(max(self._size, need), dtype=np.float32)
        if self._buf is not None and self._n:
            buf[:self._n] = self._buf[:self._n]
        self._buf = buf
        return buf

    def _emit_locked(self) -> None:
        n = self._sound_n if self.gated else self._n
        buf, start = self._buf, self._start
        self._buf, self._n, self._sound_n = None, 0, 0  # the recorder owns the filled buffer now
        if n and buf is not None:
            self.emit([buf[:n]], start, self.rate)


_ZEROS: dict[int, bytes] = {}


def _loud(samples: np.ndarray) -> bool:
    """Any sample beyond ±SILENT_PEAK. An idle speaker's exact zeros are seen by comparing bytes:
    a numpy reduction gives up the GIL and takes it back, which on a busy call costs tens of µs
    of the speaker's thread; sound is checked by max and min (no temporary array)."""
    raw = samples.tobytes()
    zeros = _ZEROS.get(len(raw))
    if zeros is None:
        zeros = _ZEROS.setdefault(len(raw), bytes(len(raw)))
    if raw == zeros:
        return False
    return bool(samples.max() > SILENT_PEAK or samples.min() < -SILENT_PEAK)
