"""Buffers one audio track (microphone frames, speaker blocks) into chunks of about 1.5 s for the
recorder. It runs on the device's own thread, so it only copies and counts: encoding and disk
writes happen on the recorder's lanes."""

from __future__ import annotations

import threading
from typing import Callable

import numpy as np

CHUNK_S = 1.5
SILENT_PEAK = 1e-4  # the speaker renders exact zeros when idle; anything above is sound
GAP_S = 0.5  # a gated track ends its chunk after this much silence

Emit = Callable[[list[np.ndarray], float, int], None]  # (blocks, start clock time, rate)


class AudioChunker:
    """`feed(samples, t)` with the clock time of the first sample; every `chunk_s` seconds the
    blocks go to `emit(blocks, start, rate)`, `start` being the first block's own time (so each
    chunk is placed by the device's timestamps, never by a running sum that could drift).
    `gated`: silence is not recorded (the speaker's idle time): a chunk starts at the first
    sound and ends after `gap_s` of silence, its trailing silence left out."""

    def __init__(self, emit: Emit, rate: int, *, chunk_s: float = CHUNK_S, gated: bool = False,
                 gap_s: float = GAP_S) -> None:
        self.emit, self.rate, self.gated = emit, int(rate), gated
        self.chunk_n, self.gap_n = int(chunk_s * rate), int(gap_s * rate)
        self._blocks: list[np.ndarray] = []
        self._start = 0.0
        self._n = 0
        self._sound_n = 0  # samples up to the end of the last block with sound (gated)
        self._sound_blocks = 0
        self._lock = threading.Lock()  # feed (device thread) against flush (whoever ends the call)

    def feed(self, samples: np.ndarray, t: float) -> None:
        if samples.size == 0:
            return
        with self._lock:
            if self.gated:
                loud = bool(samples.max() > SILENT_PEAK or samples.min() < -SILENT_PEAK)  # no temporary array
                if not self._blocks and not loud:
                    return
            self._add(np.array(samples, dtype=np.float32, copy=True).reshape(-1), t)
            if self.gated:
                if loud:
                    self._sound_n, self._sound_blocks = self._n, len(self._blocks)
                elif self._n - self._sound_n >= self.gap_n:
                    self._emit_locked()
                    return
            if self._n >= self.chunk_n:
                self._emit_locked()

    def flush(self) -> None:
        """Hand over what is buffered (the call ended)."""
        with self._lock:
            if self._blocks:
                self._emit_locked()

    def _add(self, block: np.ndarray, t: float) -> None:
        if not self._blocks:
            self._start = t
        self._blocks.append(block)
        self._n += block.size

    def _emit_locked(self) -> None:
        blocks = self._blocks[: self._sound_blocks] if self.gated else self._blocks
        start = self._start
        self._blocks, self._n, self._sound_n, self._sound_blocks = [], 0, 0, 0
        if blocks:
            self.emit(blocks, start, self.rate)
