"""A window of recent samples in milliseconds and its percentiles (queue waits in the engine's pool,
TTFTs in a worker's counters). Plain Python, shared by engine and workers."""

from __future__ import annotations

from collections import deque


class Waits:
    """The last `window` samples in milliseconds: queue waits (0 for requests dispatched at
    once) in the pool, TTFTs in the worker counters."""

    def __init__(self, window: int = 1000) -> None:
        self._samples: deque[float] = deque(maxlen=window)

    def add(self, ms: float) -> None:
        self._samples.append(max(ms, 0.0))

    def __len__(self) -> int:
        return len(self._samples)

    def percentile(self, q: float) -> float:
        """Nearest-rank percentile, q in [0, 100]; 0.0 when nothing was recorded."""
        if not self._samples:
            return 0.0
        ordered = sorted(self._samples)
        rank = max(int(-(-q * len(ordered) // 100)), 1)  # ceil(q/100 · n), at least the first
        return ordered[min(rank, len(ordered)) - 1]
