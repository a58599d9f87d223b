"""What the status bar and the admin panel show, without Qt: what the gateway's hosts report (each
worker's status, slot snapshots and per-request stats, heard as a gateway event observer) merged
with gateway.stats()."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from desktop.errors import REMOTE_UNREACHABLE as UNREACHABLE
from desktop.protocol import Done, ErrorEvent, Event, SlotInfo, SlotState
from desktop.protocol import WorkerState, WorkerStatus
from desktop.protocol.engine import EngineApi
from desktop.protocol.engine_stats import QueueStats, RequestCounts, SlotStats
from desktop.workers.stats import WorkerCounters

if TYPE_CHECKING:
    from desktop.gateway.gateway import Gateway


@dataclass(frozen=True, slots=True)
class WorkerRow:
    id: str
    state: str  # loading | idle | busy | error | unreachable (a remote worker's server)
    device: str
    in_flight: int
    capacity: int
    slots_used: int
    slots_total: int
    sessions: int
    message: str  # load progress or the error


@dataclass(frozen=True, slots=True)
class SlotRow:
    worker: str
    index: int
    state: SlotState
    hash_prefix: str  # first 8 hex of the last message-prefix hash ('' when none)
    messages: int
    tokens: int
    idle_s: float | None  # seconds since last use (None: never used)
    kv_bytes: int | None

    @property
    def key(self) -> str:
        return f"{self.worker}/{self.index}"


@dataclass(frozen=True, slots=True)
class QueueRow:
    request_id: str
    position: int
    waited_s: float
    eta_s: float
    worker: str  # the worker a session command waits for ('' for any)
    kind: str
    origin: str = "app"  # who sent it: "app" (this window, a call) or "api" (the local API)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything on the admin panel at one moment."""

    workers: list[WorkerRow]
    slots: list[SlotRow]
    queue: list[QueueRow]
    counters: dict[str, Any]  # WorkerCounters.snapshot()
    requests: RequestCounts
    routing: dict[str, int]
    cache_kinds: dict[str, int]
    queue_stats: QueueStats = QueueStats()
    origins: dict[str, int] = field(default_factory=dict)  # requests submitted, by who sent them


class EngineMonitor:
    """Watches the hosts of one gateway (`watch`), on its loop, through the gateway's event
    observers: every event of a host in the pool, as it arrives, before the gateway acts on it."""

    def __init__(self) -> None:
        self._status: dict[str, WorkerStatus] = {}
        self._slots: dict[str, tuple[SlotInfo, ...]] = {}
        self._counters = WorkerCounters()

    def watch(self, gateway: Gateway) -> None:
        """Hear the events of `gateway`'s hosts (those it has and those added later)."""
        gateway.event_observers.append(self.observe)

    def observe(self, worker_id: str, event: Event | WorkerStatus) -> None:
        if isinstance(event, WorkerStatus):
            self._status[worker_id] = event
            if event.state in (WorkerState.ERROR, WorkerState.LOADING):
                self._slots.pop(worker_id, None)  # its slots died with it (or are being rebuilt): no stale rows
        elif isinstance(event, Done):
            if event.slots:
                self._slots[worker_id] = event.slots
            if event.stats.finish_reason != "cancelled" or event.stats.input_tokens:
                self._counters.record(event.stats)
        elif isinstance(event, ErrorEvent):
            self._counters.errors += 1

    def forget(self, worker_id: str) -> None:
        """The worker left the pool: its last status and slots are not kept."""
        self._status.pop(worker_id, None)
        self._slots.pop(worker_id, None)

    def status(self, worker_id: str) -> WorkerStatus | None:
        return self._status.get(worker_id)

    def counters(self) -> dict[str, float]:
        return self._counters.snapshot()

    # ------------------------------------------------------------------ the merged view

    def snapshot(self, gateway: EngineApi, now: float | None = None) -> Snapshot:
        """Read gateway.stats() once and merge in what the tap saw. `now` is the gateway's clock."""
        now = time.monotonic() if now is None else now
        stats = gateway.stats()
        workers, slots = [], []
        for w in stats.workers:
            status = self._status.get(w.id)
            state = w.state
            if state == "idle" and w.in_flight:
                state = "busy"
            elif state == "error" and status is not None and status.code == UNREACHABLE:
                state = "unreachable"  # a remote worker's server does not answer (it comes back when it does)
            message = status.message if status is not None and status.state.value == w.state else ""
            used = sum(1 for s in w.slots if s.in_use or s.running)
            workers.append(WorkerRow(w.id, state, status.device if status else "—", w.in_flight,
                                     w.capacity, used, len(w.slots), w.sessions, message))
            known = {s.index: s for s in self._slots.get(w.id, ())}
            slots += [_slot_row(w.id, s, known.get(s.index), now) for s in w.slots]
        kinds = {k.value: n for k, n in stats.cache.items()}
        return Snapshot(workers, slots, queue_rows(stats.queue), self.counters(), stats.requests,
                        dict(stats.routing), kinds, stats.queue, dict(stats.origins))


def _slot_row(worker: str, s: SlotStats, info: SlotInfo | None, now: float) -> SlotRow:
    """One row of the slots table: the gateway's mirror of slot `s` with the tap's last snapshot
    of it (`info`: its hashes, KV memory), or, while a request runs in it, that request's view."""
    run = s.running
    if run:  # its conversation and prompt, until its Done brings the worker's own snapshot
        if run.messages is None:  # a session's command: the session's slot, grown by its prompt
            return SlotRow(worker, s.index, SlotState.BUSY, "", s.hashes, max(run.tokens, s.tokens), 0.0, None)
        return SlotRow(worker, s.index, SlotState.BUSY, run.history, run.messages, run.tokens, 0.0, None)
    if s.in_use:
        state = SlotState.BUSY
    elif s.session_id:
        state = SlotState.SESSION
    elif info is not None and info.state is not SlotState.BUSY:
        state = info.state
    else:
        state = SlotState.IDLE if s.tokens else SlotState.EMPTY
    hashes = info.hashes if info is not None else ()
    idle = now - s.last_used if s.last_used else None
    return SlotRow(worker, s.index, state, hashes[-1][:4].hex() if hashes else "", s.hashes, s.tokens,
                   idle, info.kv_bytes if info is not None and info.kv_bytes else None)


def queue_rows(queue: QueueStats) -> list[QueueRow]:
    """The waiting requests in queue order."""
    return [QueueRow(e.request_id, e.position, e.waited_s, e.eta_s, e.pin or "", _kind(e.kind), e.origin)
            for e in queue.entries]


def _kind(name: str) -> str:
    return {"Chat": "chat", "CreateSession": "new session", "AppendInput": "append",
            "Generate": "generate", "EndSession": "end session"}.get(name, name.lower())

