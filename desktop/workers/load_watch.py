"""The watchdog of a model load: progress is a stage the loader reports or CPU time the loading
thread spends; a load that shows neither for `deadline_s` (a hung network mount) is reported stuck."""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

log = logging.getLogger(__name__)

LOAD_HANG_S = 120.0  # a load that neither reports a stage nor spends CPU this long is stuck
MIN_CPU_S = 0.01  # CPU spent since the last progress that counts as progress (readings differ by µs)
STUCK = ("The model made no progress while loading for {s:.0f} s: is its drive or network folder "
         "answering? Choose another model in Settings, or restart the app once the drive answers.")


def thread_cpu(ident: int | None = None) -> Callable[[], float]:
    """A reader of the CPU seconds one thread (the calling one by default) has used; of the whole
    process where the system cannot tell a thread's. A thread blocked in the kernel (a read of a
    mount that does not answer, an open of a pipe) uses none."""
    ident = threading.get_ident() if ident is None else ident
    try:
        clock = time.pthread_getcpuclockid(ident)
        time.clock_gettime(clock)
    except (AttributeError, OSError):
        return time.process_time
    return lambda: time.clock_gettime(clock)


def others_cpu() -> float:
    """CPU seconds of the whole process but the calling thread: read by the watcher, whose own
    checks are not progress (a process that only loads: its intra-op threads count too)."""
    return time.process_time() - time.thread_time()


class LoadWatch:
    """Call `start()` on the loading thread before the load and `stop()` after it; `progress()` at
    each stage. A watcher thread calls `on_stuck(silent_s)` once when no stage came and the loading
    thread used no CPU for `deadline_s`. The load itself is not interrupted (it cannot be: its host
    ends it where it can, by killing its process)."""

    def __init__(self, on_stuck: Callable[[float], None], deadline_s: float = LOAD_HANG_S, *,
                 name: str = "load-watch", clock: Callable[[], float] = time.monotonic,
                 cpu: Callable[[], float] | None = None) -> None:
        if deadline_s <= 0:
            raise ValueError(f"deadline_s must be positive (got {deadline_s}).")
        self.on_stuck, self.deadline_s, self.name, self.clock = on_stuck, deadline_s, name, clock
        self._cpu = cpu
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._last = 0.0
        self._spent: float | None = None  # the CPU reading at the last progress (None: none yet)
        self.stuck = False

    def start(self) -> None:
        self._cpu = self._cpu or thread_cpu()
        self._last = self.clock()
        threading.Thread(target=self._watch, name=self.name, daemon=True).start()

    def progress(self) -> None:
        with self._lock:
            self._last = self.clock()

    def stop(self) -> None:
        self._done.set()

    def _watch(self) -> None:
        period = min(1.0, self.deadline_s / 8)
        while not self._done.wait(period):
            if self.check():
                return

    def check(self) -> bool:
        """Fire (once) if the load is past its deadline without progress; True when it fired."""
        spent = self._cpu() if self._cpu is not None else 0.0
        with self._lock:
            now = self.clock()
            if self._spent is None or abs(spent - self._spent) >= MIN_CPU_S:
                self._last = now if self._spent is not None else self._last
                self._spent = spent
            silent = now - self._last
            fire = not self.stuck and not self._done.is_set() and silent > self.deadline_s
            self.stuck = self.stuck or fire
        if fire:
            log.error("The model load made no progress for %.1f s: declared stuck", silent)
            try:
                self.on_stuck(silent)
            except Exception:  # the watcher must not die of its handler
                log.exception("Handling a stuck model load failed")
        return fire
