"""Who has the turn in a call, shared by its three threads (media, loop, voice): each event goes
through the turn logic (CallState) under one lock, a change of phase is reported once it
happened, and the actions the logic returns (listen, send the turn, cut the reply: a barge-in,
hang up) are carried out by `act`, outside the lock."""

from __future__ import annotations

import threading
from typing import Callable

from desktop.call.events import CallEvent
from desktop.call.state import Action, CallMode, CallState
from desktop.media.clock import Clock


class TurnTaking:
    def __init__(self, state: CallState, clock: Clock, emit: Callable[[CallEvent], None],
                 act: Callable[[list[Action]], None]) -> None:  # fmt: skip
        self.state, self.clock, self.emit, self.act = state, clock, emit, act
        self._lock = threading.RLock()

    def do(self, transition: Callable[[float], list[Action]], at: float | None = None) -> None:
        """One transition of the turn logic (at the clock's now unless `at`), then its actions;
        a change of phase is reported once it happened."""
        with self._lock:
            before = self.state.phase
            actions = transition(self.clock.now() if at is None else at)
            after = self.state.phase
        if after is not before:
            self.emit(CallEvent("phase", phase=after))
        self.act(actions)

    def set_mode(self, mode: CallMode) -> None:
        with self._lock:
            self.state.set_mode(mode)
