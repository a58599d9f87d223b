"""SIGTERM and SIGHUP (a logout, a closed terminal, `kill`) end the terminal chat as /quit does:
the conversation is saved and the worker's Shutdown runs, so the KV it holds is written to disk.
The handler only notes the signal and takes Ctrl-C's path, which the chat already handles at a safe
point (LocalClient holds Ctrl-C back during a worker step, so the KV is never cut mid-step). The
app (app.py) quits on the same signals."""

from __future__ import annotations

import signal
from typing import Any


def quit_signals() -> list[signal.Signals]:
    """SIGTERM, and SIGHUP where it exists (not on Windows)."""
    return [getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)]


class Termination:
    """In force inside `with` (on the main thread); `signal` is then the quit signal received, if
    any (the KeyboardInterrupt that follows it means "leave", not "stop the reply")."""

    def __init__(self) -> None:
        self.signal: signal.Signals | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Termination:
        for signum in quit_signals():
            self._previous[signum] = signal.signal(signum, self._received)
        return self

    def __exit__(self, *_exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _received(self, signum: int, frame: Any) -> None:
        """Run SIGINT's handler in force now, here: Python's raises KeyboardInterrupt, which ends a
        blocked read of the prompt too; LocalClient's, during a worker step, raises it after the step.
        (Raising SIGINT instead would leave a blocked read waiting: its handler runs too late.)"""
        self.signal = signal.Signals(signum)
        handler = signal.getsignal(signal.SIGINT)
        if not callable(handler):
            raise KeyboardInterrupt
        handler(signal.SIGINT, frame)
