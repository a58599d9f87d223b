"""The disk tier of one worker: an index of the snapshot folder (read from the files' headers at
start, kept up to date by the writer), the longest-prefix lookup the matcher asks, reading a
snapshot back into a runner export, and writing one (from the writer's thread).

A snapshot is loaded only when its fingerprint is this model's (fingerprint.py) and its tensors'
checksum holds; anything else (another model's, a torn or corrupt file) is deleted with one log
line, and the turn prefills as it would have without it."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from desktop.workers.kv_disk import format as fmt
from desktop.workers.kv_disk.files import SnapshotDir
from desktop.workers.kv_disk.prefetch import newest
from desktop.workers.kv_disk.state import SnapState

log = logging.getLogger(__name__)
Pack = Callable[[Any], tuple[dict, dict]]
Unpack = Callable[[dict, dict, int], Any]


@dataclass(frozen=True, slots=True)
class Snap:
    """One indexed snapshot: its file and the conversation state its header holds."""

    path: Path
    state: SnapState


class DiskStore:
    def __init__(self, folder: SnapshotDir, fingerprint: str, budget_bytes: int, pack: Pack, unpack: Unpack) -> None:
        self.folder, self.fingerprint, self.budget = folder, fingerprint, budget_bytes
        self.pack, self.unpack = pack, unpack
        self._lock = threading.Lock()
        self._snaps: dict[Path, Snap] = {}
        self._by_hash: dict[bytes, set[Path]] = {}  # chained hash → snapshots holding that message prefix

    # ------------------------------------------------------------------ the index

    def scan(self) -> int:
        """Index the folder from the headers alone; foreign, torn and corrupt files go. Returns
        how many snapshots were indexed."""
        for entry in self.folder.entries():
            try:
                header = fmt.read_header(entry.path)
            except fmt.SnapshotError as exc:
                self._drop(entry.path, f"unreadable ({exc})")
                continue
            if header.fingerprint != self.fingerprint:
                self._drop(entry.path, "made by another model, dtype or runner")
                continue
            self._add(Snap(entry.path, header.state))
        return len(self._snaps)

    def recent(self, budget_bytes: int) -> list[Path]:
        """The most recently used indexed snapshots that fit `budget_bytes` together, newest
        first (what prefetch.py reads ahead at start)."""
        with self._lock:
            held = set(self._snaps)
        return newest([e for e in self.folder.entries() if e.path in held], budget_bytes)

    def find(self, hashes: Sequence[bytes]) -> tuple[Snap, int] | None:
        """The snapshot holding the longest message prefix of a request (k ≥ 1 messages), the
        one holding the most ids among equals."""
        with self._lock:
            for k in range(len(hashes), 0, -1):
                paths = self._by_hash.get(hashes[k - 1])
                if paths:
                    return max((self._snaps[p] for p in paths), key=lambda s: (len(s.state.ids), s.path.name)), k
        return None

    def holds(self, state: SnapState) -> bool:
        """Whether a snapshot already holds all of `state` (its messages, and its ids or more)."""
        with self._lock:
            snaps = [self._snaps[p] for p in self._by_hash.get(state.hashes[-1], ())]
        return any(s.state.hashes == state.hashes and s.state.ids[: len(state.ids)] == state.ids for s in snaps)

    def __len__(self) -> int:
        return len(self._snaps)

    def _add(self, snap: Snap) -> None:
        with self._lock:
            self._forget(snap.path)
            self._snaps[snap.path] = snap
            for h in snap.state.hashes:
                self._by_hash.setdefault(h, set()).add(snap.path)

    def _forget(self, path: Path) -> None:
        snap = self._snaps.pop(path, None)
        if snap is not None:
            for h in snap.state.hashes:
                paths = self._by_hash.get(h)
                if paths is not None:
                    paths.discard(path)
                    if not paths:
                        del self._by_hash[h]

    def _drop(self, path: Path, why: str) -> None:
        log.warning("KV snapshot %s not used and deleted: %s", path.name, why)
        with self._lock:
            self._forget(path)
        self.folder.remove(path)

    def _contained(self, state: SnapState, path: Path) -> list[Path]:
        """Other snapshots whose messages and KV are a prefix of `state`'s."""
        with self._lock:
            return [p for p, s in self._snaps.items()
                    if p != path and s.state.hashes == state.hashes[: len(s.state.hashes)]
                    and s.state.ids == state.ids[: len(s.state.ids)]]

    # ------------------------------------------------------------------ reading and writing

    def restore(self, snap: Snap, n: int) -> Any | None:
        """The runner export of the snapshot's first n positions, or None (the file was gone,
        torn, corrupt or another model's: it is deleted). A restored snapshot is marked used."""
        try:
            header, tensors = fmt.read(snap.path)
            if header.fingerprint != self.fingerprint:
                raise fmt.SnapshotError("made by another model, dtype or runner")
            saved = self.unpack(tensors, header.runner, n)
        except FileNotFoundError:
            with self._lock:
                self._forget(snap.path)
            return None
        except Exception as exc:  # SnapshotError, or tensors that do not fit this runner
            self._drop(snap.path, str(exc))
            return None
        self.folder.touch(snap.path)
        return saved

    def write(self, state: SnapState, saved: Any) -> Path:
        """Write one conversation's KV (from the writer's thread); the same branch replaces its
        file. Then the folder is trimmed to the budget, least recently used first."""
        start = time.perf_counter()
        path = self.folder.path_for(state.conversation, state.key)
        tensors, meta = self.pack(saved)
        size = fmt.write(path, tensors, self.fingerprint, state, meta)
        self._add(Snap(path, state))
        for old in self._contained(state, path):  # an earlier turn of this branch: the new file holds it all
            with self._lock:
                self._forget(old)
            self.folder.remove(old)
        if self.folder.trim(self.budget, keep=path):
            with self._lock:
                for gone in [p for p in self._snaps if not p.exists()]:
                    self._forget(gone)
        log.debug("KV snapshot %s: %d tokens, %d bytes in %.0f ms", path.name, len(state.ids), size,
                  1000 * (time.perf_counter() - start))
        return path
