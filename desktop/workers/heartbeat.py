"""Liveness of worker loops: on the worker's side a Pulse counts progress (scheduler ticks, model
layers run) and sends heartbeats; on the host's side a Watchdog declares the worker hung when they
stop, or stop progressing while it works, for longer than the deadline."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable

from desktop.protocol import Heartbeat

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Liveness:
    """`beat_s`: a worker sends a heartbeat at least this often, idle or busy. `hang_after_s`: a
    worker silent (or busy without progress) this long is declared hung. Progress is counted per
    model layer, so even one long prefill chunk on a slow CPU keeps beating; where one layer is
    seen to take long (a big model on a slow CPU), the deadline grows to `slack` times the longest
    gap seen between two steps of progress, up to `hang_max_s`."""

    beat_s: float = 0.5
    hang_after_s: float = 5.0
    slack: float = 3.0
    hang_max_s: float = 60.0
    load_hang_s: float = 120.0  # a model load with no stage and no CPU spent this long is stuck (load_watch.py)

    def __post_init__(self) -> None:
        if not 0.0 < self.beat_s <= 10.0:
            raise ValueError(f"beat_s must be in (0, 10] seconds (got {self.beat_s}).")
        if self.hang_after_s < 2 * self.beat_s:
            raise ValueError(f"hang_after_s must be at least two heartbeats (got {self.hang_after_s}).")
        if self.slack < 1.0 or self.hang_max_s < self.hang_after_s:
            raise ValueError("slack must be ≥ 1 and hang_max_s ≥ hang_after_s.")


class Pulse:
    """Worker side, used on the loop's thread only: `tick()` after each scheduler step, `idle()`
    while waiting for commands; `layer()` counts work inside a forward (the runner's watch_layers).
    A Heartbeat goes to `send` at most every `beat_s`."""

    def __init__(self, send: Callable[[Heartbeat], None], beat_s: float, clock: Callable[[], float] = time.monotonic):
        self.send, self.beat_s, self.clock = send, beat_s, clock
        self.work = 0
        self.running = 0
        self.resets = 0
        self._last = float("-inf")

    def tick(self, running: int, resets: int) -> None:
        self.work += 1
        self.running, self.resets = running, resets
        self._maybe()

    def idle(self, resets: int) -> None:
        self.running, self.resets = 0, resets
        self._maybe()

    def layer(self) -> None:
        """One decoder layer ran (the runner calls this from inside a forward: Runner.watch_layers)."""
        self.work += 1
        self._maybe()

    def _maybe(self) -> None:
        now = self.clock()
        if now - self._last >= self.beat_s:
            self._last = now
            self.send(Heartbeat(self.work, self.running, self.resets))


class Watchdog:
    """Host side. Fed every heartbeat (from any thread); while armed, a daemon thread calls
    `on_hung(silent_s)` once when no progress came for `hang_after_s`: no heartbeat at all, or
    only heartbeats of a busy worker whose work count stands still. Disarmed while the worker
    loads, is down or is closing; `arm()` again when it is up. The thread calls `check()`."""

    def __init__(self, liveness: Liveness, on_hung: Callable[[float], None], name: str,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.liveness, self.on_hung, self.name, self.clock = liveness, on_hung, name, clock
        self._lock = threading.Lock()
        self._armed = False
        self._closed = threading.Event()
        self._last = 0.0
        self._work: int | None = None
        self._busy = False
        self.slowest = 0.0  # longest gap seen between two steps of progress of a busy worker
        self._thread: threading.Thread | None = None

    def arm(self) -> None:
        with self._lock:
            self._armed, self._last, self._work = True, self.clock(), None
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name=self.name, daemon=True)
                self._thread.start()

    def disarm(self) -> None:
        with self._lock:
            self._armed = False

    def beat(self, beat: Heartbeat) -> None:
        with self._lock:
            if beat.running == 0 or beat.work != self._work:
                now = self.clock()
                if self._busy and beat.running and self._work is not None:
                    self.slowest = max(self.slowest, now - self._last)
                self._last = now
            self._work, self._busy = beat.work, beat.running > 0

    @property
    def deadline_s(self) -> float:
        """How long the worker may go without progress now (grows on a slow machine)."""
        live = self.liveness
        return max(live.hang_after_s, min(live.slack * self.slowest, live.hang_max_s))

    def close(self) -> None:
        self._closed.set()

    def _watch(self) -> None:
        period = min(0.25, self.liveness.hang_after_s / 6)
        before = self.clock()
        while not self._closed.wait(period):
            now = self.clock()
            # Woken late means this process was starved, not the worker: skip a round so that
            # the reader can first take the heartbeats waiting in the pipe.
            if now - before < period + 1.0:
                self.check()
            before = now

    def check(self) -> bool:
        """Declare the worker hung (once per arming) if it is past its deadline."""
        with self._lock:
            silent = self.clock() - self._last
            fire = self._armed and silent > self.deadline_s
            if fire:
                self._armed = False
        if fire:
            log.error("Worker %s made no progress for %.1f s: declared hung", self.name, silent)
            try:
                self.on_hung(silent)
            except Exception:  # the watchdog must outlive a failing handler
                log.exception("Handling hung worker %s failed", self.name)
        return fire
