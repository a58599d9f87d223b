"""The file operations a recorder makes, in one small object so that tests can pass one that fails
like a full disk (OSError ENOSPC) or a read-only folder."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO, Any

from desktop.recording.paths import PART


class Disk:
    """Write-then-rename files, atomic JSON, an append-only text file."""

    def makedirs(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)

    def write_file(self, path: Path, data: bytes) -> None:
        """`path` appears only complete: written to `<path>.part`, then renamed."""
        part = path.with_name(path.name + PART)
        with open(part, "wb") as f:
            f.write(data)
        os.replace(part, path)

    def write_json(self, path: Path, obj: Any) -> None:
        self.write_file(path, json.dumps(obj, ensure_ascii=False, indent=1).encode("utf-8"))

    def open_append(self, path: Path) -> IO[str]:
        return open(path, "a", encoding="utf-8", newline="\n")

    def append_line(self, f: IO[str], line: str) -> None:
        f.write(line + "\n")
        f.flush()  # in the OS's hands now: a killed process loses nothing written before
