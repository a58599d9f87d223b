"""The two voices of a recording mixed to one mono stream at one rate, read forward block by block
from any position (each track resampled by a continuous soxr stream, so block edges do not click)."""

from __future__ import annotations

import numpy as np

from desktop.recording.track import Track


class _Voice:
    """One track read forward from a sample position, at the mix's rate."""

    def __init__(self, track: Track, rate: int, t: float) -> None:
        self.track, self.rate = track, rate
        self.pos = int(round(t * track.rate))  # next native sample to read
        self.pending = np.zeros(0, np.float32)
        self.stream = None
        if track.rate != rate:
            import soxr

            self.stream = soxr.ResampleStream(track.rate, rate, 1, dtype="float32")

    def read(self, n: int) -> np.ndarray:
        while len(self.pending) < n:
            need = n - len(self.pending)
            step = max(256, int(np.ceil(need * self.track.rate / self.rate)) + 64)
            data = self.track.read_samples(self.pos, self.pos + step)
            self.pos += step
            if self.stream is not None:
                data = self.stream.resample_chunk(data)
            self.pending = np.concatenate([self.pending, data])
        out, self.pending = self.pending[:n], self.pending[n:]
        return out


class Mix:
    """`seek(t)` then `read(n)` → the next n samples of user + assistant at `rate` (clipped)."""

    def __init__(self, tracks: list[Track], rate: int | None = None) -> None:
        self.tracks = [t for t in tracks if not t.empty]
        self.rate = int(rate or max((t.rate for t in self.tracks), default=16000))
        self._voices: list[_Voice] = []
        self.seek(0.0)

    @property
    def empty(self) -> bool:
        return not self.tracks

    def seek(self, t: float) -> None:
        self._voices = [_Voice(track, self.rate, max(0.0, t)) for track in self.tracks]

    def read(self, n: int) -> np.ndarray:
        out = np.zeros(n, np.float32)
        for voice in self._voices:
            out += voice.read(n)
        return np.clip(out, -1.0, 1.0, out=out)
