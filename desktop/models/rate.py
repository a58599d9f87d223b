"""Download speed and time left, from (time, bytes) samples: the speed over the last few seconds
(a sliding window, so a stall shows at once and an old burst does not linger)."""

from __future__ import annotations

from collections import deque

WINDOW_S = 5.0


class Rate:
    def __init__(self, window_s: float = WINDOW_S) -> None:
        self._window = window_s
        self._samples: deque[tuple[float, int]] = deque()

    def add(self, now: float, done: int) -> None:
        if self._samples and done < self._samples[-1][1]:
            self._samples.clear()  # a new file, or a restart from a shorter partial file
        self._samples.append((now, done))
        while len(self._samples) > 2 and now - self._samples[1][0] >= self._window:
            self._samples.popleft()

    def speed(self) -> float:
        """Bytes per second (0 before two samples)."""
        if len(self._samples) < 2:
            return 0.0
        (t0, b0), (t1, b1) = self._samples[0], self._samples[-1]
        return (b1 - b0) / (t1 - t0) if t1 > t0 else 0.0

    def eta_s(self, left: int) -> float | None:
        speed = self.speed()
        return left / speed if speed > 0 else None


def human_eta(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    s = int(seconds + 0.5)
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 60} min {s % 60:02d} s" if s >= 60 else f"{s} s"
