"""Queue timing: a moving average of recent service times (for a queued request's ETA) and a
window of recent queue waits (for the p50/p95 shown in the admin panel and /metrics)."""

from __future__ import annotations

from collections import deque

from desktop.workers.waits import Waits  # noqa: F401  (re-exported: the pool's queue waits)


class ServiceTimes:
    """Moving average of how long a worker's capacity stays taken by one request.

    Before the first sample the average is `prior_s`, a guess for a short chat turn."""

    def __init__(self, window: int = 32, prior_s: float = 2.0) -> None:
        if window < 1 or prior_s < 0:
            raise ValueError(f"window must be ≥ 1 and prior_s ≥ 0 (got {window}, {prior_s}).")
        self._samples: deque[float] = deque(maxlen=window)
        self._prior_s = prior_s

    def add(self, seconds: float) -> None:
        """Record one request's service time (dispatch to terminal event)."""
        self._samples.append(max(seconds, 0.0))

    @property
    def mean_s(self) -> float:
        return sum(self._samples) / len(self._samples) if self._samples else self._prior_s

    def eta(self, position: int, capacity: int) -> float:
        """Seconds until the request at 1-based `position` should start, with `capacity`
        sequences served at once by the workers it can use."""
        return position * self.mean_s / max(capacity, 1)
