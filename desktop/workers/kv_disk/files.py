"""The folder of KV snapshots on disk, as files (no torch): where a snapshot lives, how much room
they take, and which go (the disk budget, a cleared cache, a deleted conversation, a conversation
that no longer exists).

One snapshot is one file `<conversation>--<key>.kvsnap` (safetensors; `kv_disk/format.py` reads
and writes its contents): `conversation` is the id of the saved conversation whose KV it holds
("_" for none: an API client's), `key` names the branch (hex). A file is written under a
temporary name and renamed into place (safefile.write_atomic), so a file with the suffix is
always complete; a write cut short (kill -9) leaves only a temporary file, removed later. A
file's modification time is when it was last used: the budget removes the least recently used
first."""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from desktop.safefile import clean_stale_temps, human_size

log = logging.getLogger(__name__)

SUFFIX = ".kvsnap"
NO_CONVERSATION = "_"
_NAME = re.compile(r"^([A-Za-z0-9_-]{1,64})--([0-9a-f]{1,64})\.kvsnap$")
_SAFE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def kv_root() -> Path:
    """Where the app keeps its snapshots: the `kv` folder of Omnidesk's cache."""
    from desktop.model.default_model import cache_root

    return cache_root() / "kv"


@dataclass(frozen=True, slots=True)
class Entry:
    """One snapshot file: its path, conversation ("_" for none), key, size and last use."""

    path: Path
    conversation: str
    key: str
    size: int
    used: float


class SnapshotDir:
    """The snapshot files of one folder. Every method tolerates files that vanish meanwhile
    (another process clearing the folder, a worker trimming it) and never raises for them."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    def path_for(self, conversation: str, key: str) -> Path:
        """The file of branch `key` (hex) of `conversation` ("" or None: no conversation)."""
        conv = conversation or NO_CONVERSATION
        if not _SAFE.match(conv):  # an id we did not make: never let it shape a path
            conv = NO_CONVERSATION
        if not re.fullmatch(r"[0-9a-f]{1,64}", key):
            raise ValueError(f"a snapshot key is hex, not {key!r}")
        return self.root / f"{conv}--{key}{SUFFIX}"

    def entries(self) -> list[Entry]:
        """Every complete snapshot file in the folder, least recently used first."""
        out: list[Entry] = []
        try:
            scan = list(os.scandir(self.root))
        except OSError:
            return out
        for item in scan:
            match = _NAME.match(item.name)
            if not match:
                continue
            try:
                info = item.stat(follow_symlinks=False)
            except OSError:
                continue
            out.append(Entry(Path(item.path), match.group(1), match.group(2), info.st_size, info.st_mtime))
        out.sort(key=lambda e: (e.used, e.path.name))
        return out

    def used_bytes(self) -> int:
        return sum(e.size for e in self.entries())

    def touch(self, path: Path, when: float | None = None) -> None:
        """Mark a snapshot used now (the budget keeps the most recently used)."""
        try:
            os.utime(path, None if when is None else (when, when))
        except OSError:
            pass

    def remove(self, path: Path) -> bool:
        try:
            os.unlink(path)
            return True
        except FileNotFoundError:
            return False
        except OSError as exc:
            log.warning("Could not remove the KV snapshot %s: %s", path.name, exc)
            return False

    def clear(self) -> int:
        """Remove every snapshot (the Settings' "Clear"); returns how many went."""
        gone = sum(self.remove(e.path) for e in self.entries())
        clean_stale_temps(self.root)
        return gone

    def delete_conversation(self, conversation: str) -> int:
        """Remove the snapshots of one conversation (it was deleted)."""
        if not conversation or not _SAFE.match(conversation) or conversation == NO_CONVERSATION:
            return 0
        return sum(self.remove(e.path) for e in self.entries() if e.conversation == conversation)

    def collect(self, keep: Iterable[str]) -> int:
        """At start: remove the snapshots of conversations not in `keep` (those without one stay,
        for the budget to judge) and the temporary files of writes that were cut short."""
        keep = set(keep)
        gone = sum(self.remove(e.path) for e in self.entries()
                   if e.conversation != NO_CONVERSATION and e.conversation not in keep)
        clean_stale_temps(self.root)
        if gone:
            log.info("Removed %d KV snapshot(s) of conversations that no longer exist", gone)
        return gone

    def trim(self, budget_bytes: int, keep: Path | None = None) -> int:
        """Remove the least recently used snapshots until the folder fits `budget_bytes`; `keep`
        (the one just written) goes last, only if it alone is over the budget."""
        entries = self.entries()
        total = sum(e.size for e in entries)
        order = [e for e in entries if e.path != keep] + [e for e in entries if e.path == keep]
        gone = 0
        for e in order:
            if total <= budget_bytes:
                break
            gone += self.remove(e.path)
            total -= e.size
        if gone:
            log.info("KV snapshots over the %s disk budget: removed the %d least recently used",
                     human_size(budget_bytes), gone)
        return gone
