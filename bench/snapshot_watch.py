"""The KV snapshot folder seen from outside the worker, for bench/restart.py: when each snapshot
file appeared (polled every few ms: a write's end is its rename into place), their sizes, a
pristine copy to start each restart from, and the OS page cache dropped for them (so a restore
reads the disk, as after a reboot, not memory the write left behind)."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

from desktop.workers.kv_disk.files import SnapshotDir

POLL_S = 0.002


class SnapshotWatch:
    """Polls `root` on a thread from `start()` to `stop()`; `seen` maps (name, size, mtime_ns) to
    the perf_counter time it was first seen."""

    def __init__(self, root: Path) -> None:
        self.dir = SnapshotDir(root)
        self.seen: dict[tuple[str, int, int], float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> SnapshotWatch:
        self._look()
        self._thread = threading.Thread(target=self._loop, name="snapshot-watch", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(POLL_S):
            self._look()

    def _look(self) -> None:
        now = time.perf_counter()
        for e in self.dir.entries():
            try:
                key = (e.path.name, e.size, os.stat(e.path).st_mtime_ns)
            except OSError:
                continue
            self.seen.setdefault(key, now)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._look()

    def written_after(self, t0: float, conversation: str) -> list[tuple[float, str, int]]:
        """(seconds after t0, name, bytes) of the snapshots of `conversation` that appeared or
        changed after t0, first first."""
        out = [(at - t0, name, size) for (name, size, _), at in self.seen.items()
               if at >= t0 and name.startswith(f"{conversation}--")]
        return sorted(out)


def snapshots(root: Path, conversation: str | None = None) -> list:
    """The complete snapshot files in `root` (of one conversation when given)."""
    return [e for e in SnapshotDir(root).entries() if conversation is None or e.conversation == conversation]


def copy_snapshots(src: Path, dst: Path) -> None:
    """`dst` holds exactly the snapshot files of `src` (times kept: the budget reads them)."""
    shutil.rmtree(dst, ignore_errors=True)
    dst.mkdir(parents=True)
    for e in snapshots(src):
        shutil.copy2(e.path, dst / e.path.name)


def drop_page_cache(root: Path) -> bool:
    """Ask the OS to forget the cached pages of every snapshot in `root` (flushed first), so the
    next read comes from the disk; False where the platform cannot."""
    if not hasattr(os, "posix_fadvise"):
        return False
    for e in snapshots(root):
        try:
            fd = os.open(e.path, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return True
