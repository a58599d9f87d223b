"""The writer thread of the disk tier: the worker loop hands it a copy of a conversation's KV
(already exported, so the slot is free at once) and goes on; the thread writes the files one by
one. Its backlog is bounded in bytes: when the disk is slower than the conversations that leave
RAM, a spill is dropped (one log line) rather than a reply kept waiting."""

from __future__ import annotations

import logging
import queue
import threading
from typing import Any, Callable

log = logging.getLogger(__name__)
_FLUSH = object()  # a job that only marks a point in the queue


class SpillWriter:
    def __init__(self, write: Callable[[Any, Any], object], max_backlog_bytes: int) -> None:
        """`write(state, saved)` writes one snapshot (DiskStore.write)."""
        self.write, self.max_backlog = write, max_backlog_bytes
        self.backlog = 0
        self.written = self.dropped = 0
        self._lock = threading.Lock()
        self._jobs: queue.Queue[tuple[Any, Any, int] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="kv-disk-writer", daemon=True)
        self._thread.start()

    def submit(self, state: Any, saved: Any, nbytes: int) -> bool:
        """Queue one spill; False (dropped) when the backlog would pass its bound."""
        with self._lock:
            if self.backlog and self.backlog + nbytes > self.max_backlog:
                self.dropped += 1
                log.warning("KV snapshot of %d tokens not written: the disk writer is %d MB behind",
                            len(state.ids), self.backlog >> 20)
                return False
            self.backlog += nbytes
        self._jobs.put((state, saved, nbytes))
        return True

    def flush(self, timeout: float) -> bool:
        """Wait until every queued spill is written (at most `timeout` s); True when none is left."""
        done = threading.Event()
        self._jobs.put((_FLUSH, done, 0))
        return done.wait(timeout)

    def close(self, timeout: float = 15.0) -> bool:
        """Write what is queued (bounded by `timeout`), then end the thread."""
        done = self.flush(timeout)
        self._jobs.put(None)
        return done

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            state, saved, nbytes = job
            if state is _FLUSH:
                saved.set()
                continue
            try:
                self.write(state, saved)
                self.written += 1
            except Exception as exc:  # a full disk, a folder gone: this spill is lost, never the app
                log.warning("Could not write a KV snapshot: %s", exc)
            finally:
                with self._lock:
                    self.backlog -= nbytes
