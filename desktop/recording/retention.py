"""Retention: recordings older than `retention_days` are deleted, then the oldest ones until all
of them fit in `max_storage_gb`. Only folders named like sessions are touched, and never one that
is being recorded (in this process, or unfinished and written to in the last minutes)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from desktop.recording.paths import FOLDER, META, folder_time
from desktop.recording.sane import epoch
from desktop.recording.writer import live_folders

log = logging.getLogger(__name__)
FRESH_S = 10 * 60.0  # an unfinished session written to this recently may be another app's live one
GB = 1_000_000_000
_said_links: set[str] = set()  # roots whose links were mentioned once (a log line each run is noise)


@dataclass(frozen=True, slots=True)
class Session:
    path: Path
    started_at: float
    bytes: int
    ended: bool
    touched: float  # the newest mtime in the folder


@dataclass(slots=True)
class Freed:
    """What a clean-up did: the folders it deleted, by age and by size, and what is left."""

    by_age: list[str] = field(default_factory=list)
    by_size: list[str] = field(default_factory=list)
    bytes: int = 0
    kept: int = 0
    kept_bytes: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.by_age) + len(self.by_size)

    def message(self, days: int, max_gb: float) -> str:
        if not self.count:
            return f"Recordings: nothing to clean up ({self.kept} kept, {_size(self.kept_bytes)})."
        parts = []
        if self.by_age:
            parts.append(f"{len(self.by_age)} older than {days} days")
        if self.by_size:
            parts.append(f"{len(self.by_size)} to stay under {max_gb:g} GB")
        return (f"Recordings cleaned up: freed {_size(self.bytes)} ({' and '.join(parts)}); "
                f"{self.kept} kept, {_size(self.kept_bytes)}.")


def scan(root: Path) -> list[Session]:
    """Every session folder under `root`, oldest first. A link is never followed (a link named
    like a session may point anywhere): it is left out, said once in the log."""
    out = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return []
    for entry in entries:
        path = Path(entry.path)
        if entry.is_symlink():
            if FOLDER.match(entry.name) and str(root) not in _said_links:
                _said_links.add(str(root))
                log.info("Recordings clean-up leaves links alone (e.g. %s); only real folders are counted", path)
            continue
        if not entry.is_dir(follow_symlinks=False) or not FOLDER.match(entry.name):
            continue
        started, ended = _meta(path)
        size, touched = _usage(path)
        started = started or folder_time(path) or touched
        out.append(Session(path, started, size, ended, touched))
    out.sort(key=lambda s: s.started_at)
    return out


def apply_retention(root: Path, retention_days: float, max_storage_gb: float, *,
                    now: Callable[[], float] = time.time, live: Callable[[], Iterable[Path]] = live_folders,
                    fresh_s: float = FRESH_S) -> Freed:
    """Delete what the limits ask for; returns what was freed (also logged)."""
    sessions, freed, t = scan(root), Freed(), now()
    busy = {Path(p).resolve() for p in live()}

    def protected(s: Session) -> bool:
        return s.path.resolve() in busy or (not s.ended and t - s.touched < fresh_s)

    kept = []
    for s in sessions:
        if not protected(s) and s.started_at < t - retention_days * 86400 and _delete(s, freed):
            freed.by_age.append(s.path.name)
        else:
            kept.append(s)
    total, limit = sum(s.bytes for s in kept), max_storage_gb * GB
    for s in list(kept):  # oldest first
        if total <= limit:
            break
        if not protected(s) and _delete(s, freed):
            freed.by_size.append(s.path.name)
            total -= s.bytes
            kept.remove(s)
    freed.kept, freed.kept_bytes = len(kept), total
    if freed.count or freed.errors:
        log.info("%s", freed.message(int(retention_days), max_storage_gb))
    return freed


def _delete(s: Session, freed: Freed) -> bool:
    try:
        if s.path.is_symlink():  # swapped for a link since the scan: never followed
            return False
        shutil.rmtree(s.path)
    except OSError as exc:
        log.warning("Could not delete the recording %s: %s", s.path, exc)
        freed.errors.append(f"{s.path.name}: {exc.strerror or exc}")
        return False
    freed.bytes += s.bytes
    return True


def _meta(path: Path) -> tuple[float | None, bool]:
    """(started_at, ended) from meta.json; (None, False) when it cannot be read."""
    try:
        meta = json.loads((path / META).read_text(encoding="utf-8"))
        return epoch(meta.get("started_at")), meta.get("ended_at") is not None
    except (OSError, ValueError, AttributeError, RecursionError):
        return None, False


def _usage(path: Path) -> tuple[int, float]:
    """(bytes, newest mtime) of everything in the folder; links are counted as themselves, never
    followed."""
    size, newest = 0, 0.0
    for base, dirs, files in os.walk(path):  # os.walk does not follow links to folders
        for name in [*files, *dirs]:
            try:
                st = os.lstat(os.path.join(base, name))
            except OSError:
                continue
            newest = max(newest, st.st_mtime)
            if stat.S_ISREG(st.st_mode):
                size += st.st_size
    if newest == 0.0:
        try:
            newest = path.lstat().st_mtime
        except OSError:
            pass
    return size, newest


def _size(n: int) -> str:
    for unit, scale in (("GB", GB), ("MB", 1_000_000), ("KB", 1_000)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"
