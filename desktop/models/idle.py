"""When to unload an idle model: after N minutes in which no request ran (0: never). The clock is
passed in; the composition ticks it with the engine's activity: whether a request runs or waits,
and how many were submitted (so a short one between two ticks counts too)."""

from __future__ import annotations


class IdleClock:
    def __init__(self, now: float) -> None:
        self._since = now
        self._submitted = -1

    def observe(self, now: float, busy: bool, submitted: int) -> None:
        if busy or submitted != self._submitted:
            self.touch(now)
        self._submitted = submitted

    def touch(self, now: float) -> None:
        """Something ran (a request, a load): the idle time starts again."""
        self._since = now

    def due(self, now: float, minutes: int) -> bool:
        return minutes > 0 and now - self._since >= minutes * 60.0

    def idle_s(self, now: float) -> float:
        return now - self._since
