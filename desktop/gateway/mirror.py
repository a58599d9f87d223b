"""The gateway's view of one worker: its state, the capacity its requests hold, and a mirror of
its KV slots (what each holds, when the gateway last saw it used) that cache-aware routing reads.

The mirror's slots change only from what the worker reports (the slot snapshot of a Done, the
slot a Done names when it sends no snapshot, a session's end, a restart): routing never reserves
or edits a slot. The worker chooses its slot by its own rules; routing only picks the worker, and
counts the requests running there against the slots it can see (see `WorkerMirror._open`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum

from desktop.protocol import SlotInfo, SlotState
from desktop.protocol import WorkerState


class Route(str, Enum):
    """Why a request went where it went: its history was cached (hit), an empty slot was free,
    the least recently used slot will be evicted, or it is a session pinned to its worker."""

    HIT = "hit"
    FREE = "free"
    EVICT = "evict"
    SESSION = "session"


UP_STATES = (WorkerState.IDLE, WorkerState.BUSY)


class Duplex(str, Enum):
    """A worker serving a voice call: its latency matters more than anything routed beside it."""

    ACTIVE = "duplex_active"
    PAUSED = "duplex_paused"
IN_USE = (SlotState.BUSY,)  # a snapshot's state for a slot a request builds or runs in


def empty_slot(index: int) -> SlotInfo:
    return SlotInfo(index=index, state=SlotState.EMPTY, hashes=(), tokens=0, last_used=0.0, session_id=None, kv_bytes=0)


@dataclass(eq=False, slots=True)
class WorkerMirror:
    """One worker as routing sees it. `running` maps each request holding capacity here to what
    routing counted on: None for a session command (it runs in its session's slot), else the
    history hash it was sent here to hit, or b"" when it was not a hit (it will take an empty
    slot, or evict one)."""

    worker_id: str
    state: WorkerState = WorkerState.LOADING
    message: str = ""  # what the worker last said about its state (why it is down)
    code: str = ""  # why it is down: model_load, worker_crashed, worker_hung
    restarting: bool = False  # down, but its host is bringing it back
    context_length: int = 0  # the model's context in tokens, once it was up
    supports_images: bool = False  # its model can see images (known once it was up)
    capacity: int = 1
    slots: list[SlotInfo] = field(default_factory=lambda: [empty_slot(0)])
    used_at: dict[int, float] = field(default_factory=dict)  # slot → gateway clock at its last Done
    running: dict[str, bytes | None] = field(default_factory=dict)
    calls: dict[str, bool] = field(default_factory=dict)  # voice-call session → paused

    @property
    def up(self) -> bool:
        return self.state in UP_STATES

    @property
    def can_serve(self) -> bool:
        """Up, loading, or down but coming back: requests may wait for it."""
        return self.up or self.state is WorkerState.LOADING or self.restarting

    @property
    def free(self) -> int:
        """Sequences this worker can still take now (0 while it is down)."""
        return max(self.capacity - len(self.running), 0) if self.up else 0

    def reset(self, num_slots: int, capacity: int) -> None:
        """A fresh worker process: every slot empty (its KV died with the old one)."""
        self.capacity = max(capacity, 1)
        self.slots = [empty_slot(i) for i in range(max(num_slots, 1))]
        self.used_at.clear()
        self.running.clear()
        self.calls.clear()

    # ------------------------------------------------------------------ routing reads

    def _open(self) -> tuple[list[SlotInfo], int]:
        """The slots a new request could be given here, and how many of them the running
        requests the snapshot does not show yet will take first.

        Open: no session's, and not in use in the last snapshot (while nothing that takes a slot
        runs here, an in-use mark is stale, e.g. left by a request that failed without a
        snapshot, and is ignored). Every running request that takes a slot uses one: those the
        snapshot shows in use are already out of the open slots; the rest (sent after it) are
        `unseen`, each about to take one open slot."""
        takers = sum(1 for claim in self.running.values() if claim is not None)
        shared = [s for s in self.slots if s.session_id is None]
        if not takers:
            return shared, 0
        open_ = [s for s in shared if s.state not in IN_USE]
        return open_, max(takers - (len(shared) - len(open_)), 0)

    def spare(self) -> int:
        """Slots a new request can still count on here (≤ 0: none)."""
        open_, unseen = self._open()
        return len(open_) - unseen

    def hit_slot(self, history: bytes) -> int | None:
        """An open slot that holds this history hash, if a new request can count on one here.
        While some running request is unseen, none may have been sent here to hit the same
        history (it would take that slot first)."""
        if not history:
            return None
        open_, unseen = self._open()
        if len(open_) <= unseen or (unseen and history in self.running.values()):
            return None
        hits = [s for s in open_ if history in s.hashes]
        return max(hits, key=lambda s: self.used_at.get(s.index, 0.0)).index if hits else None

    def empty_slots(self) -> list[int]:
        """The empty open slots a new request can count on: as many as the unseen running
        requests that were no hit would fill are left out (a hit fills the slot it hits)."""
        open_, unseen = self._open()
        if len(open_) <= unseen:
            return []
        misses = sum(1 for claim in self.running.values() if claim == b"")
        empties = [s.index for s in open_ if not s.hashes and s.tokens == 0]
        return empties[min(unseen, misses):]

    def lru_slot(self) -> tuple[int, float] | None:
        """The open slot used longest ago, with that time; None when no slot is left to count on."""
        open_, unseen = self._open()
        if len(open_) <= unseen:
            return None
        slot = min(open_, key=lambda s: self.used_at.get(s.index, 0.0))
        return slot.index, self.used_at.get(slot.index, 0.0)

    # ------------------------------------------------------------------ changes

    def take(self, request_id: str, claim: bytes | None) -> None:
        """Hold capacity for a request (`claim` as in `running`); no slot is touched."""
        self.running[request_id] = claim

    def release(self, request_id: str, snapshot: tuple[SlotInfo, ...], *, slot: int = -1,
                hashes: tuple[bytes, ...] | None = None, session_id: str | None = None, now: float = 0.0) -> None:
        """Give back the request's capacity and take in what the worker reported: its slot
        snapshot replaces the mirror. Without one, the slot its Done named (`slot` ≥ 0) now holds
        `hashes` (a chat: its conversation and the reply) or belongs to `session_id` (a session
        just opened); a request that ended without naming a slot changes no slot."""
        self.running.pop(request_id, None)
        if snapshot:
            self.slots = [replace(s, index=i) for i, s in enumerate(snapshot)]
        elif 0 <= slot < len(self.slots) and (hashes is not None or session_id is not None):
            held = self.slots[slot]
            self.slots[slot] = replace(held, state=SlotState.IDLE, hashes=hashes or (), session_id=session_id,
                                       tokens=max(held.tokens, 1))
        if 0 <= slot < len(self.slots):
            self.used_at[slot] = now

    def forget_session(self, session_id: str) -> None:
        """The session ended without a snapshot: its slot is free to evict (its KV is gone)."""
        self.slots = [empty_slot(s.index) if s.session_id == session_id else s for s in self.slots]
        self.calls.pop(session_id, None)

    @property
    def duplex(self) -> Duplex | None:
        """The seed's duplex states: ACTIVE while a voice call here is live, PAUSED while every
        call here is paused; None without calls."""
        if not self.calls:
            return None
        return Duplex.PAUSED if all(self.calls.values()) else Duplex.ACTIVE

    @property
    def cached_slots(self) -> int:
        """Slots holding some chat's history (what a new call placed here would push out)."""
        return sum(1 for s in self.slots if s.session_id is None and (s.hashes or s.tokens))
