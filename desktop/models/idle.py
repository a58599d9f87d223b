"""When to unload an idle model: after N minutes in which no request ran (0: never). The clock is
passed in; the composition ticks it with whether the engine is busy."""

from __future__ import annotations


class IdleClock:
    def __init__(self, now: float) -> None:
        self._since = now

    def touch(self, now: float) -> None:
        """Something ran (a request, a load): the idle time starts again."""
        self._since = now

    def due(self, now: float, minutes: int) -> bool:
        return minutes > 0 and now - self._since >= minutes * 60.0

    def idle_s(self, now: float) -> float:
        return now - self._since
