"""The recorder's small writer pool: a few threads shared by every session, and `Lane`s on it —
each runs its jobs in order, one at a time, so a track's chunks and the timeline's lines keep their
order while different lanes write in parallel. Submitting never blocks."""

from __future__ import annotations

import logging
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

log = logging.getLogger(__name__)
WORKERS = 2  # disk writes and JPEG/WAV encoding; more threads would only compete with the call
BATCH = 8  # jobs a lane runs before it gives its thread to the other lanes


class WriterPool:
    """The threads the recorders write on (created on first use)."""

    def __init__(self, workers: int = WORKERS) -> None:
        self.workers = workers
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def submit(self, fn: Callable[[], None]) -> None:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self.workers, thread_name_prefix="omnidesk-rec")
            executor = self._executor
        executor.submit(fn)

    def lane(self) -> Lane:
        return Lane(self)

    def shutdown(self, wait: bool = True) -> None:
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
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
