"""The time left in a model load, from how fast its current stage's fraction grows: the elapsed
time of the stage × (1 − f) / f, said once the stage has run a little (earlier guesses jump)."""

from __future__ import annotations

import time
from typing import Callable

MIN_S = 1.0  # a stage younger than this has no estimate yet
MIN_FRACTION = 0.03


class TimeLeft:
    """Call with each (stage, fraction) the loader reports; returns the seconds left, or None."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.stage: str | None = None
        self.start = 0.0
        self.last = 0.0

    def __call__(self, stage: str, fraction: float | None) -> float | None:
        now = self.clock()
        if stage != self.stage or fraction is None or fraction < self.last:  # a new stage starts the clock again
            self.stage, self.start, self.last = stage, now, fraction or 0.0
            return None
        self.last = fraction
        elapsed = now - self.start
        if elapsed < MIN_S or fraction < MIN_FRACTION or fraction >= 1.0:
            return None
        return elapsed * (1.0 - fraction) / fraction


def left_text(seconds: float) -> str:
    """'about 12 s left', 'about 3 min left' (rounded: the estimate is rough)."""
    if seconds < 60:
        return f"about {max(1, round(seconds))} s left"
    return f"about {round(seconds / 60)} min left"
