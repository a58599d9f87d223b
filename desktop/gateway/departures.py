"""Where conversations were cached when their worker went away (removed, unreachable, crashed),
so that the turn another worker then serves from scratch says why: "moved from remote0
(unreachable)" instead of the new worker's own, true but unhelpful, "not cached since this worker
loaded". A small bounded map, Qt-free, owned by the gateway."""

from __future__ import annotations

from typing import Iterable

from desktop.bounded import BoundedDict
from desktop.gateway.health import UNREACHABLE
from desktop.protocol import SlotInfo, WorkerState, WorkerStatus
from desktop.protocol.reasons import moved

LIMIT = 4096  # hashes kept, oldest dropped: ~600 KB at most; 8 slots × 200 messages fit twice


def why_down(status: WorkerStatus) -> str:
    """A few words for why a worker that was up is down now, as its status says."""
    if status.code == UNREACHABLE:
        return "unreachable"
    if status.state is WorkerState.LOADING:
        return "reloaded"
    if status.restarting:
        return "restarted"
    if status.code == "worker_hung":
        return "stopped responding"
    return "stopped"


class Departures:
    """History hash → (the worker whose slot held it when it left the pool or went down, why).

    Each slot's message-prefix hashes are kept but the first: that one is the hash of a first
    message alone (the system prompt), which is the history of every new conversation that
    starts with it; a new conversation keeps its own miss reason."""

    def __init__(self, limit: int = LIMIT) -> None:
        if limit < 1:
            raise ValueError(f"limit must be ≥ 1 (got {limit}).")
        self._where: BoundedDict[bytes, tuple[str, str]] = BoundedDict(limit)

    def __len__(self) -> int:
        return len(self._where)

    def record(self, worker_id: str, why: str, slots: Iterable[SlotInfo]) -> None:
        """The worker's slots (session slots aside) held these conversations when it left."""
        for slot in slots:
            if slot.session_id is not None:
                continue
            for h in slot.hashes[1:]:
                self._where.pop(h, None)
                self._where[h] = (worker_id, why)

    def take(self, history: bytes, worker_id: str) -> str | None:
        """A chat with this history was served by `worker_id`: forget where it was cached (the
        move is told once), and say "moved from W (why)" when W is another worker, else None."""
        where = self._where.pop(history, None) if history else None
        if where is None or where[0] == worker_id:
            return None
        return moved(where[0], where[1])
