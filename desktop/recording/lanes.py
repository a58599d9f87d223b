"""The recorder's small writer pool: a few threads shared by every session, and `Lane`s on it —
each runs its jobs in order, one at a time, so a track's chunks and the timeline's lines keep their
order while different lanes write in parallel. Submitting never blocks.

The pool can be held (`hold(max_s)`): its threads start no job until `release()` or until `max_s`
has passed, so that while a call's reply is on its way (end of speech → first audio) the encoding
and disk writes do not compete with it for the CPU; the jobs wait, in order, and run after."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

log = logging.getLogger(__name__)
WORKERS = 2  # disk writes and JPEG/WAV encoding; more threads would only compete with the call
BATCH = 8  # jobs a lane runs before it gives its thread to the other lanes
HOLD_MAX_S = 1.5  # the longest a hold keeps the writers idle (memory stays bounded, a crash loses little)


class Gate:
    """Open, or held until `release()` or a deadline. `wait()` (the writer threads, before each
    job) returns once it is open; holding and releasing are cheap enough for a device thread."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._open = threading.Event()
        self._open.set()
        self._until = 0.0
        self.holds = 0  # holds begun (for tests and benches)

    @property
    def held(self) -> bool:
        return not self._open.is_set() and self.clock() < self._until

    def hold(self, max_s: float = HOLD_MAX_S) -> None:
        """Hold for at most `max_s` from now; a hold already on is kept as it is (never extended)."""
        if self.held:
            return
        self._until = self.clock() + max_s
        self.holds += 1
        self._open.clear()

    def release(self) -> None:
        if not self._open.is_set():
            self._open.set()

    def wait(self) -> None:
        while not self._open.is_set():
            left = self._until - self.clock()
            if left <= 0:
                self._open.set()
                return
            self._open.wait(left)


class WriterPool:
    """The threads the recorders write on (created on first use)."""

    def __init__(self, workers: int = WORKERS, gate: Gate | None = None) -> None:
        self.workers = workers
        self.gate = gate or Gate()
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def submit(self, fn: Callable[[], None]) -> None:
        self._get().submit(fn)

    def start(self) -> None:
        """Start the threads now (a session's start), so that no device thread ever pays for it."""
        with self._lock:
            started = self._executor is not None
        if not started:
            executor = self._get()
            for _ in range(self.workers):  # the executor spawns a thread per submit up to `workers`
                executor.submit(time.sleep, 0.01)

    def _get(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self.workers, thread_name_prefix="omnidesk-rec")
            return self._executor

    def lane(self) -> Lane:
        return Lane(self)

    def hold(self, max_s: float = HOLD_MAX_S) -> None:
        """No job starts until `release()` or for `max_s` (see Gate)."""
        self.gate.hold(max_s)

    def release(self) -> None:
        self.gate.release()

    def shutdown(self, wait: bool = True) -> None:
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            self.gate.release()  # nothing may wait on a hold that nobody will release
            executor.shutdown(wait=wait)


_shared: WriterPool | None = None


def shared_pool() -> WriterPool:
    """The app's one writer pool."""
    global _shared
    if _shared is None:
        _shared = WriterPool()
    return _shared


class Lane:
    """Jobs in order, one at a time, on the pool's threads. A job that raises is logged; the next
    job runs. `wait(timeout)`: True once every job submitted so far has run."""

    def __init__(self, pool: WriterPool) -> None:
        self.pool = pool
        self._jobs: deque[tuple[Callable[..., Any], tuple[Any, ...]]] = deque()
        self._lock = threading.Lock()
        self._running = False
        self._idle = threading.Event()
        self._idle.set()

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        with self._lock:
            self._jobs.append((fn, args))
            if self._running:
                return
            self._running = True
            self._idle.clear()
        self.pool.submit(self._drain)

    def __len__(self) -> int:
        return len(self._jobs)

    def wait(self, timeout: float | None = None) -> bool:
        return self._idle.wait(timeout)

    def _drain(self) -> None:
        for _ in range(BATCH):
            self.pool.gate.wait()
            with self._lock:
                if not self._jobs:
                    self._running = False
                    self._idle.set()
                    return
                fn, args = self._jobs.popleft()
            try:
                fn(*args)
            except Exception:
                log.exception("recording job failed")
        self.pool.submit(self._drain)  # more to do: back of the pool's queue, fair to other lanes
