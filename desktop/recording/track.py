"""One voice of a recording (the user's or the assistant's) as its listed WAV chunks placed at
their start times, silence between them: read any span, or a min/max summary for a waveform."""

from __future__ import annotations

import bisect
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from desktop.bounded import BoundedDict

log = logging.getLogger(__name__)
_CACHE = 32  # decoded chunks kept (≈1–2 s each)


@dataclass(frozen=True, slots=True)
class Chunk:
    path: Path
    start: float  # seconds since the recording started
    duration: float
    rate: int


class Track:
    """Samples are float32 mono at `rate`; sample i is at time i / rate. A chunk recorded at
    another rate is resampled; one that cannot be decoded reads as silence."""

    def __init__(self, name: str, rate: int, chunks: list[Chunk]) -> None:
        self.name, self.rate = name, int(rate)
        self.chunks = sorted(chunks, key=lambda c: c.start)
        self._starts = [int(round(c.start * self.rate)) for c in self.chunks]
        self._longest = max((int(np.ceil(c.duration * self.rate)) + 1 for c in self.chunks), default=0)
        self._cache: BoundedDict[Path, np.ndarray] = BoundedDict(_CACHE, lru=True)
        self._peaks: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    @property
    def duration(self) -> float:
        return max((c.start + c.duration for c in self.chunks), default=0.0)

    @property
    def empty(self) -> bool:
        return not self.chunks

    def read_samples(self, i0: int, i1: int) -> np.ndarray:
        """Samples [i0, i1) of the track (silence outside its chunks; zeros past its end)."""
        out = np.zeros(max(0, i1 - i0), dtype=np.float32)
        first = bisect.bisect_left(self._starts, i0 - self._longest)  # no earlier chunk reaches i0
        for chunk, c0 in zip(self.chunks[first:], self._starts[first:]):
            if c0 >= i1:
                break
            if c0 + int(np.ceil(chunk.duration * self.rate)) + 1 <= i0:
                continue
            data = self._decode(chunk)
            lo, hi = max(i0, c0), min(i1, c0 + len(data))
            if hi > lo:  # a later chunk overwrites an overlap (chunks are contiguous pieces)
                out[lo - i0:hi - i0] = data[lo - c0:hi - c0]
        return out

    def read(self, t0: float, t1: float) -> np.ndarray:
        return self.read_samples(int(round(t0 * self.rate)), int(round(t1 * self.rate)))

    def samples(self) -> np.ndarray:
        """The whole track (for short recordings and tests; the player reads spans)."""
        return self.read_samples(0, int(np.ceil(self.duration * self.rate)))

    def peaks(self, per_second: int = 100) -> tuple[np.ndarray, np.ndarray]:
        """(mins, maxs) of each 1/per_second bin over the whole track, computed chunk by chunk
        (never the whole track in memory) and kept."""
        if per_second not in self._peaks:
            size = max(1, self.rate // per_second)
            n = int(np.ceil(self.duration * self.rate / size))
            mins, maxs = np.zeros(n, np.float32), np.zeros(n, np.float32)
            for chunk in self.chunks:
                data = self._decode(chunk, keep=False)
                c0 = int(round(chunk.start * self.rate))
                first = c0 // size
                pad = c0 - first * size  # align the chunk to bin edges
                block = np.concatenate([np.zeros(pad, np.float32), data])
                block = np.pad(block, (0, (-len(block)) % size)).reshape(-1, size)
                last = min(n, first + len(block))
                block = block[:last - first]
                np.minimum(mins[first:last], block.min(axis=1), out=mins[first:last])
                np.maximum(maxs[first:last], block.max(axis=1), out=maxs[first:last])
            self._peaks[per_second] = (mins, maxs)
        return self._peaks[per_second]

    def _decode(self, chunk: Chunk, *, keep: bool = True) -> np.ndarray:
        data = self._cache.get(chunk.path)
        if data is not None:
            return data
        import soundfile

        try:
            data, rate = soundfile.read(str(chunk.path), dtype="float32", always_2d=True)
            data = data.mean(axis=1) if data.shape[1] > 1 else data[:, 0]
            if rate != self.rate:
                import soxr

                data = soxr.resample(data, rate, self.rate).astype(np.float32)
        except Exception as exc:  # soundfile.LibsndfileError, a truncated or foreign file
            log.warning("Cannot read the audio chunk %s: %s", chunk.path, exc)
            data = np.zeros(0, np.float32)
        data = np.ascontiguousarray(data, dtype=np.float32)
        if keep:
            self._cache[chunk.path] = data
        return data
