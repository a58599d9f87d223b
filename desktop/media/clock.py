"""Time for the media devices and the output pipeline: a `Clock` protocol, the real clock, and a
thread-safe virtual clock so that tests and benchmarks run without waiting for real time."""

from __future__ import annotations

import threading
import time
from enum import Enum
from typing import Protocol

# Two float sums of the same step sizes can differ in the last bit; a sleeper whose deadline is
# within this of the virtual time counts as due (so 4 × advance(0.005) wakes a sleep(0.02)).
_EPS = 1e-9


class Clock(Protocol):
    """Seconds on a monotonic time line, and a way to wait on it."""

    def now(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class RealClock:
    """Wall time: `time.monotonic` and `time.sleep`."""

    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class ClockMode(str, Enum):
    MANUAL = "manual"  # time moves only by advance()/advance_to()/step(); sleep() blocks until then
    COMPUTE = "compute"  # time = real time spent computing + every sleep skipped at once


class VirtualClock:
    """A clock for tests and benchmarks; every method is thread-safe.

    MANUAL: `now()` moves only when told (`advance`, `advance_to`, `step`); `sleep(s)` blocks the
    calling thread until virtual time reaches its deadline. `sleepers`, `next_deadline()` and
    `wait_for_sleepers()` let a test drive the stages deterministically.

    COMPUTE: `now()` follows real time (so computing costs what it measures), but `sleep(s)`
    returns at once and moves the clock to the sleeper's deadline: playback or pacing waits cost
    nothing. Concurrent sleepers are not ordered (the clock jumps to each deadline in turn), so it
    suits benchmarks with one pacing thread rather than exact multi-thread schedules."""

    def __init__(self, start: float = 0.0, mode: ClockMode | str = ClockMode.MANUAL) -> None:
        self.mode = ClockMode(mode)
        self._t = float(start)  # MANUAL: the time; COMPUTE: the offset added to real elapsed time
        self._origin = time.perf_counter()
        self._cond = threading.Condition()
        self._deadlines: list[float] = []  # one entry per blocked sleeper (MANUAL)

    def _now(self) -> float:
        if self.mode is ClockMode.COMPUTE:
            return self._t + (time.perf_counter() - self._origin)
        return self._t

    def now(self) -> float:
        with self._cond:
            return self._now()

    def sleep(self, seconds: float) -> None:
        """Wait `seconds` of virtual time (MANUAL: block until advanced; COMPUTE: jump)."""
        if not seconds > 0:
            return
        with self._cond:
            deadline = self._now() + seconds
            if self.mode is ClockMode.COMPUTE:
                self._t += max(0.0, deadline - self._now())
                self._cond.notify_all()
                return
            self._deadlines.append(deadline)
            self._cond.notify_all()  # wakes wait_for_sleepers()
            try:
                while self._t < deadline - _EPS:
                    self._cond.wait()
            finally:
                self._deadlines.remove(deadline)
                self._cond.notify_all()

    def advance(self, seconds: float) -> None:
        """Move virtual time forward; sleepers whose deadline has passed wake up."""
        if seconds < 0:
            raise ValueError(f"a clock cannot go backwards (advance({seconds}))")
        with self._cond:
            self._t += seconds
            self._cond.notify_all()

    def advance_to(self, t: float) -> None:
        """Move virtual time forward to `t` (no-op if it is already there)."""
        with self._cond:
            self._t += max(0.0, t - self._now())
            self._cond.notify_all()

    @property
    def sleepers(self) -> int:
        """How many threads are blocked in `sleep()` now."""
        with self._cond:
            return len(self._deadlines)

    def next_deadline(self) -> float | None:
        """The earliest deadline among blocked sleepers, or None."""
        with self._cond:
            return min(self._deadlines, default=None)

    def step(self) -> bool:
        """Advance to the earliest sleeper's deadline; False when nobody sleeps."""
        with self._cond:
            if not self._deadlines:
                return False
            self._t += max(0.0, min(self._deadlines) - self._now())
            self._cond.notify_all()
            return True

    def wait_for_sleepers(self, n: int = 1, timeout: float = 1.0) -> bool:
        """Block (real time, at most `timeout` s) until at least `n` threads sleep on this clock."""
        with self._cond:
            return self._cond.wait_for(lambda: len(self._deadlines) >= n, timeout)
