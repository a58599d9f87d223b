"""What a recording has handed to its writers and the disk has not taken yet: each chunk gets
its file number here, or is dropped when too much is waiting (noted once per stretch); and while
the writer pool is held, an audio chunk (or a second frame) releases it, so that a crash loses at
most the last chunk."""

from __future__ import annotations

import threading
from typing import Callable

from desktop.recording.lanes import WriterPool

_GROUP = {"user": "audio", "ai": "audio", "frame": "frame"}
# What a hold lets wait. An audio chunk never waits: a kill just as a second one came would lose
# both (the waiting one could not be written in time), so a chunk ends the hold; one frame may.
WAITING_MAX = {"audio": 0, "frame": 1}


class Backlog:
    """`take` from the callers' threads, `done` from the writer threads once a chunk is written.
    `on_drop(what)`: the first chunk of `what` dropped in a stretch (the recorder notes it)."""

    def __init__(self, pool: WriterPool, max_pending: int, on_drop: Callable[[str], None]) -> None:
        self.pool, self.max_pending, self.on_drop = pool, max_pending, on_drop
        self._count = {"user": 0, "ai": 0, "frame": 0, "image": 0}
        self._lock = threading.Lock()  # counts and pending bytes (callers are on several threads)
        self._pending = 0
        self._waiting = {"audio": 0, "frame": 0}  # chunks and frames handed over, not yet written
        self._dropped: dict[str, float] = {}

    def take(self, what: str, nbytes: int, seconds: float) -> int:
        """The next file number for `what`, or 0 when the chunk is dropped (too much waiting for
        the disk: noted once per stretch)."""
        with self._lock:
            if self._pending + nbytes > self.max_pending:
                first = what not in self._dropped
                self._dropped[what] = self._dropped.get(what, 0.0) + seconds
                if first:
                    self.on_drop(what)
                return 0
            self._dropped.pop(what, None)
            self._pending += nbytes
            self._count[what] += 1
            index = self._count[what]
            group = _GROUP.get(what)
            crowded = False
            if group is not None:
                self._waiting[group] += 1
                crowded = self._waiting[group] > WAITING_MAX[group]
        if crowded:  # one more would wait on a hold: write now (a crash loses at most the last chunk)
            self.pool.release()
        return index

    def done(self, nbytes: int, group: str) -> None:
        """A chunk of `group` ("audio" | "frame") of `nbytes` is written (or given up)."""
        with self._lock:
            self._pending -= nbytes
            self._waiting[group] -= 1
