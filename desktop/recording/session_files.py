"""The files of one recording's folder as they reach the disk: a media file (complete before it
is listed), a timeline line, meta.json. The first disk error stops them all: `failed` holds the
warning the user reads (noted in the timeline where the disk still takes it, told once to
`on_warning`), and nothing more is written."""

from __future__ import annotations

import errno
import json
import logging
import threading
from pathlib import Path
from typing import Any, Callable, Iterable

from desktop.recording.disk import Disk
from desktop.recording.paths import META, TIMELINE

log = logging.getLogger(__name__)


def plain_error(exc: OSError, folder: Path, what: str) -> str:
    """A disk error as the user reads it: what stopped, why, and that the session goes on."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        why = "the disk is full"
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        why = f"the folder {folder.parent} cannot be written to"
    else:
        why = f"it could not be written to {folder.parent} ({exc.strerror or exc})"
    return f"Recording stopped: {why}. The {what} goes on; what was recorded so far is kept."


class SessionFiles:
    """`meta` is the session's meta.json (the recorder's own dict); `now()`: session seconds, for
    the note of a failure; `kind` names the session in the warning ("call", "chat")."""

    def __init__(self, folder: Path, kind: str, meta: dict[str, Any], disk: Disk, now: Callable[[], float],
                 on_warning: Callable[[str], None] | None) -> None:  # fmt: skip
        self.folder, self.kind, self.meta, self.disk, self.now, self.on_warning = folder, kind, meta, disk, now, on_warning
        self.failed: str | None = None  # the warning, once the recording stopped on an error
        self.bytes_written = 0
        self._file: Any = None
        self._lock = threading.Lock()  # a failure is reported once (writers are on several threads)

    def open(self, subfolders: Iterable[str]) -> None:
        """The folder's subfolders, meta.json and the timeline, opened for appending."""
        try:  # a few mkdirs and one small file: at the session's start, never in its loop
            for sub in subfolders:
                self.disk.makedirs(self.folder / sub)
            self.write_meta()
            self._file = self.disk.open_append(self.folder / TIMELINE)
        except OSError as exc:
            self.fail(exc)

    def put(self, rel: str, data: bytes) -> bool:
        """A whole file at `rel` in the folder; False if the disk refused it (the recording stopped)."""
        try:
            self.disk.write_file(self.folder / rel, data)
        except OSError as exc:
            self.fail(exc)
            return False
        self.bytes_written += len(data)
        return True

    def append(self, obj: dict[str, Any]) -> None:
        """One timeline line."""
        if self.failed is not None or self._file is None:
            return
        line = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
        try:
            self.disk.append_line(self._file, line)
        except OSError as exc:
            self.fail(exc)
            return
        self.bytes_written += len(line) + 1

    def write_meta(self) -> None:
        self.disk.write_json(self.folder / META, self.meta)

    def guarded(self, fn: Callable[[], None]) -> None:
        """`fn()` unless the recording stopped; a disk error in it stops the recording."""
        if self.failed is not None:
            return
        try:
            fn()
        except OSError as exc:
            self.fail(exc)

    def fail(self, exc: OSError) -> None:
        with self._lock:
            if self.failed is not None:
                return
            self.failed = plain_error(exc, self.folder, self.kind)
        log.warning("%s (%s: %s)", self.failed, self.folder, exc)
        if self._file is not None:  # say so in the timeline where the disk still takes it (not when full)
            try:
                self.disk.append_line(self._file, json.dumps({"t": round(self.now(), 4), "kind": "note",
                                                              "text": self.failed}))
            except (OSError, ValueError):
                pass
        if self.on_warning is not None:
            try:
                self.on_warning(self.failed)
            except Exception:
                log.exception("recording warning listener failed")

    def close(self) -> None:
        """The timeline file (the session's end)."""
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                pass
