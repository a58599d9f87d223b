"""Small helpers of the recording tests: a recorder on a virtual clock and a disk that fails."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from desktop.recording.disk import Disk


class FullDisk(Disk):
    """Takes `room` file writes (chunks, meta), then fails every write with ENOSPC, as a full disk does."""

    def __init__(self, room: int = 0, err: int = errno.ENOSPC) -> None:
        self.room, self.err, self.failures = room, err, 0

    def _spend(self) -> None:
        if self.room <= 0:
            self.failures += 1
            raise OSError(self.err, os.strerror(self.err))
        self.room -= 1

    def write_file(self, path: Path, data: bytes) -> None:
        self._spend()
        super().write_file(path, data)

    def append_line(self, f, line: str) -> None:
        if self.room <= 0:
            self.failures += 1
            raise OSError(self.err, os.strerror(self.err))
        super().append_line(f, line)
