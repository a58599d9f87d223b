"""Jitter buffer between TTS and the speaker: a preallocated float32 ring with pre-roll, underrun
counting and flush. One writer thread and one reader (the audio callback), no locks, no threads."""

from __future__ import annotations

import numpy as np


class JitterBuffer:
    """Single-producer single-consumer ring of mono float32 samples.

    Positions are absolute sample counts (`write_pos`, `read_pos`) that only grow; the writer owns
    `write_pos`, the end mark and the skip list, the reader owns `read_pos` and the play state.
    Each side publishes its position only after copying, so with the GIL no lock is needed.

    - Pre-roll: after start or an underrun, reading plays silence until `pre_roll` samples are
      buffered, or until the stream has ended (`end()`), so a short last chunk still plays. The
      writer may move the gate at any time (`set_pre_roll`: the adaptive pre-roll,
      `media/preroll.py`); with `credit_wait`, silence played while audio waits counts towards
      it (time spent waiting is time the synthesiser had to make more), from the gate's last move.
    - Underrun: a read that runs dry while playing, before the end mark, fills with silence and
      counts one underrun; playing then waits for pre-roll again.
    - Flush: `flush()` marks a range to skip; the next `read_into` jumps over it, so a flush
      takes effect within one read."""

    def __init__(
        self,
        sample_rate: int,
        *,
        capacity_s: float = 30.0,
        pre_roll_ms: float = 120.0,
        high_water_ms: float = 3000.0,
        credit_wait: bool = False,
    ) -> None:
        if sample_rate <= 0 or capacity_s <= 0 or pre_roll_ms < 0:
            raise ValueError("sample_rate and capacity_s must be > 0, pre_roll_ms >= 0")
        self.sample_rate = sample_rate
        self.capacity = int(round(capacity_s * sample_rate))
        self.pre_roll = min(int(round(pre_roll_ms * sample_rate / 1000)), self.capacity)
        self.high_water = min(int(round(high_water_ms * sample_rate / 1000)), self.capacity)
        self._ring = np.zeros(self.capacity, dtype=np.float32)
        self.write_pos = 0  # writer-owned
        self._end_pos = -1  # writer-owned: data up to here is complete
        self._skips: tuple[tuple[int, int], ...] = ()  # writer-owned, replaced never mutated
        self.read_pos = 0  # reader-owned
        self.playing = False  # reader-owned: pre-roll satisfied, not yet run dry
        self.underruns = 0  # reader-owned
        # Silence played because the stream ran dry (the underruns' gaps, until pre-roll is met
        # again): how much longer than its audio the stream took to play. Not the first pre-roll,
        # nor silence after the end or a flush (an end or flush bumps _marks, closing a gap).
        self.starved = 0  # reader-owned, samples
        self._dry: int | None = None  # reader-owned: the _marks value when the stream ran dry
        self._marks = 0  # writer-owned
        self.credit_wait = credit_wait
        self._gate = 0  # writer-owned: bumped by set_pre_roll
        self._waited = 0  # reader-owned: silence played while audio waited, since the gate moved
        self._waited_gate = 0  # reader-owned: the _gate value _waited counts from

    # ---- writer side -------------------------------------------------------------------------
    @property
    def free(self) -> int:
        """Samples that can be written now without overwriting unread audio."""
        return self.capacity - (self.write_pos - self.read_pos)

    def write(self, samples: np.ndarray) -> int:
        """Append as many samples as fit; returns how many were taken (never blocks)."""
        k = min(len(samples), self.free)
        if k <= 0:
            return 0
        start = self.write_pos % self.capacity
        first = min(k, self.capacity - start)
        self._ring[start : start + first] = samples[:first]
        if k > first:  # wrap around
            self._ring[: k - first] = samples[first:k]
        self.write_pos += k  # publish after the copy
        return k

    def set_pre_roll(self, samples: int) -> None:
        """Move the gate (writer side): `samples` to buffer before playing; what was waited so
        far no longer counts towards it."""
        self.pre_roll = min(max(int(samples), 0), self.capacity)
        self._gate += 1

    def end(self) -> None:
        """Everything written so far is complete: play it without waiting for pre-roll, and
        running dry at its end is not an underrun."""
        self._end_pos = self.write_pos
        self._marks += 1

    def flush(self, start: int = 0, stop: int | None = None) -> None:
        """Drop buffered audio in the absolute range [start, stop) (default: all written so far).
        The reader jumps over it at its next read."""
        stop = self.write_pos if stop is None else stop
        r = self.read_pos
        kept = tuple(s for s in self._skips if s[1] > r)
        if stop > max(start, r):
            kept += ((start, stop),)
        self._skips = kept
        self._marks += 1

    @property
    def buffered(self) -> int:
        """Samples written and not yet read (including any not yet skipped by a flush)."""
        return self.write_pos - self.read_pos

    @property
    def buffered_ms(self) -> float:
        return 1000.0 * self.buffered / self.sample_rate

    @property
    def above_high_water(self) -> bool:
        return self.buffered > self.high_water

    # ---- reader side (audio callback) --------------------------------------------------------
    def read(self, n: int) -> np.ndarray:
        """Convenience for tests: `read_into` a new array of n samples."""
        out = np.empty(n, dtype=np.float32)
        self.read_into(out)
        return out

    def read_into(self, out: np.ndarray) -> int:
        """Fill `out` (1-D float32) with the next samples, silence where there are none; returns
        how many real samples were copied. Allocates nothing."""
        n = len(out)
        w, end, skips = self.write_pos, self._end_pos, self._skips
        r = _skip(self.read_pos, skips)
        skipped = r != self.read_pos
        if not self.playing:
            have = w - r
            if self.credit_wait and have > 0:
                if self._waited_gate != self._gate:
                    self._waited, self._waited_gate = 0, self._gate
                have += self._waited
            if have >= max(self.pre_roll, 1) or r < end <= w:
                self.playing, self._dry, self._waited = True, None, 0
            else:
                if self.credit_wait and w > r:
                    self._waited += n
                out[:] = 0.0
                if self._dry is not None and self._dry == self._marks and not skipped:
                    self.starved += n  # still refilling after an underrun: the gap goes on
                else:
                    self._dry = None
                self.read_pos = r
                return 0
        filled = 0
        while filled < n and r < w:
            k = min(n - filled, w - r)
            for s, _ in skips:  # stop at the next flushed range
                if r < s < r + k:
                    k = s - r
            start = r % self.capacity
            first = min(k, self.capacity - start)
            out[filled : filled + first] = self._ring[start : start + first]
            if k > first:
                out[filled + first : filled + k] = self._ring[: k - first]
            filled += k
            r += k
            nr = _skip(r, skips)
            skipped |= nr != r
            r = nr
        if filled < n:
            out[filled:] = 0.0
            if r != end and not skipped:
                self.underruns += 1
                self.starved += n - filled
                self._dry = self._marks
            self.playing = False
        self.read_pos = r  # publish after the copy
        return filled


def _skip(r: int, skips: tuple[tuple[int, int], ...]) -> int:
    """Move r past every flushed range that contains it."""
    moved = True
    while moved:
        moved = False
        for s, e in skips:
            if s <= r < e:
                r, moved = e, True
    return r
