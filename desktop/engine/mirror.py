"""The gateway's view of one worker: its state, the capacity its requests hold, and a mirror of
its KV slots (what each holds, when the gateway last used it) that cache-aware routing reads."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum

from desktop.protocol import SlotInfo
from desktop.protocol import WorkerState


class Route(str, Enum):
    """Why a request went where it went: its history was cached (hit), an empty slot was free,
    the least recently used slot will be evicted, or it is a session pinned to its worker."""

    HIT = "hit"
    FREE = "free"
    EVICT = "evict"
    SESSION = "session"


UP_STATES = (WorkerState.IDLE, WorkerState.BUSY)


def empty_slot(index: int) -> SlotInfo:
    return SlotInfo(index=index, state="free", hashes=(), tokens=0, last_used=0.0, session_id=None, kv_bytes=0)


@dataclass(eq=False, slots=True)
class WorkerMirror:
    """One worker as routing sees it. `running` maps each request holding capacity here to the
    slot it was given (None for session commands, which use their session's slot); a slot in
    `reserved` is in use and can neither be matched nor evicted by another request."""

    worker_id: str
    state: WorkerState = WorkerState.LOADING
    message: str = ""  # what the worker last said about its state (why it is down)
    code: str = ""  # why it is down: model_load, worker_crashed, worker_hung
    restarting: bool = False  # down, but its host is bringing it back
    context_length: int = 0  # the model's context in tokens, once it was up
    capacity: int = 1
    slots: list[SlotInfo] = field(default_factory=lambda: [empty_slot(0)])
    used_at: dict[int, float] = field(default_factory=dict)  # slot → gateway clock at last use
    running: dict[str, int | None] = field(default_factory=dict)
    reserved: dict[int, str] = field(default_factory=dict)
    _before: dict[str, SlotInfo] = field(default_factory=dict)  # slot as it was, to undo on error

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
        self.reserved.clear()
        self._before.clear()

    def _usable(self) -> list[SlotInfo]:
        return [s for s in self.slots if s.index not in self.reserved and s.session_id is None]

    def hit_slot(self, history: bytes) -> int | None:
        """A usable slot that holds this history hash, if any."""
        if not history:
            return None
        hits = [s for s in self._usable() if history in s.hashes]
        return max(hits, key=lambda s: self.used_at.get(s.index, 0.0)).index if hits else None

    def empty_slots(self) -> list[int]:
        return [s.index for s in self._usable() if not s.hashes and s.tokens == 0]

    def lru_slot(self) -> tuple[int, float] | None:
        """The usable slot used longest ago, with that time; None when every slot is taken."""
        usable = self._usable()
        if not usable:
            return None
        slot = min(usable, key=lambda s: self.used_at.get(s.index, 0.0))
        return slot.index, self.used_at.get(slot.index, 0.0)

    def take(self, request_id: str, slot: int | None, hashes: tuple[bytes, ...], session_id: str | None,
             now: float) -> None:
        """Hold capacity (and the slot) for a request; the slot is assumed to hold what the
        request will leave in it until the worker's Done says otherwise."""
        self.running[request_id] = slot
        if slot is None:
            return
        self.reserved[slot] = request_id
        self._before[request_id] = self.slots[slot]
        self.slots[slot] = replace(self.slots[slot], state="active", hashes=hashes, session_id=session_id,
                                   tokens=max(self.slots[slot].tokens, 1))
        self.used_at[slot] = now

    def move(self, request_id: str, slot: int) -> None:
        """The worker chose another slot than the one predicted (PrefillDone.slot): follow it."""
        old = self.running.get(request_id)
        if old is None or old == slot or not 0 <= slot < len(self.slots):
            return
        mine, theirs = self.slots[old], self.slots[slot]
        other = self.reserved.get(slot)
        if other is not None:  # two predictions crossed: swap them, contents and undo records
            self.slots[old], self.slots[slot] = replace(theirs, index=old), replace(mine, index=slot)
            self.used_at[old], self.used_at[slot] = self.used_at.get(slot, 0.0), self.used_at.get(old, 0.0)
            self._before[request_id], self._before[other] = self._before[other], self._before[request_id]
            self.reserved[old], self.running[other] = other, old
        else:
            self.slots[old] = self._before[request_id]
            self.slots[slot] = replace(mine, index=slot)
            self.used_at[slot] = self.used_at.get(old, 0.0)
            self._before[request_id] = theirs
            del self.reserved[old]
        self.reserved[slot], self.running[request_id] = request_id, slot

    def release(self, request_id: str, snapshot: tuple[SlotInfo, ...], ok: bool,
                hashes: tuple[bytes, ...] | None, now: float) -> None:
        """Give back the request's capacity and slot. The worker's slot snapshot, when it sent
        one, replaces the mirror; else a successful request keeps `hashes` (or the optimistic
        guess) and a failed one restores the slot as it was before."""
        slot = self.running.pop(request_id, None)
        before = self._before.pop(request_id, None)
        if slot is not None:
            self.reserved.pop(slot, None)
            self.used_at[slot] = now
        if snapshot:
            self.slots = [replace(s, index=i) for i, s in enumerate(snapshot)]
            for i in [i for i in self.reserved if i >= len(self.slots)]:
                self.slots.append(empty_slot(i))  # a shrunken snapshot never drops a reservation
        elif slot is not None and slot < len(self.slots):
            if not ok and before is not None:
                self.slots[slot] = before
            else:
                kept = hashes if hashes is not None else self.slots[slot].hashes
                self.slots[slot] = replace(self.slots[slot], state="idle", hashes=kept)

    def forget_session(self, session_id: str) -> None:
        """The session ended without a snapshot: its slot is free to evict (its KV is gone)."""
        self.slots = [empty_slot(s.index) if s.session_id == session_id else s for s in self.slots]
