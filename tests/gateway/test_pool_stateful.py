"""A randomized stateful test of the pool: arrivals, cancels, finishes (with a slot snapshot, with
only the slot a Done names, with nothing, or failed), worker crashes and recoveries in any order.
Each worker is simulated: it picks its own slot (hit, empty, least recently used) and reports as
a real one does. Nothing is lost or assigned twice, capacity is never over-committed, a worker
never lacks a slot for what it was sent, FIFO holds, and every request ends exactly once."""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter
from dataclasses import dataclass

from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from desktop.gateway.pool import Pool
from desktop.gateway.request import Request
from desktop.protocol import Chat, CreateSession, Generate, SlotInfo
from desktop.errors import QueueFullError
from desktop.model.messages import Message
from desktop.protocol import WorkerState, WorkerStatus

WORKERS = {"w0": (1, 1), "w1": (2, 2), "w2": (2, 3)}  # id → (capacity, slots)


def conv_hash(conv: int) -> bytes:
    return hashlib.sha256(bytes([conv])).digest()


@dataclass
class SimSlot:
    """One slot of a simulated worker: the conversation it holds, its session, who uses it."""

    index: int
    holds: bytes = b""
    session: str | None = None
    active: str | None = None
    last: float = 0.0

    def info(self) -> SlotInfo:
        state = "busy" if self.active else "idle" if self.holds else "empty"
        return SlotInfo(self.index, state, (self.holds,) if self.holds else (), 1 if self.holds else 0, self.last,
                        self.session, 0)


class SimWorker:
    """A worker's own slot choice, as desktop/workers does it: a slot holding the history, else
    an empty slot, else the least recently used idle one; session commands use their session's."""

    def __init__(self, num_slots: int) -> None:
        self.slots = [SimSlot(i) for i in range(num_slots)]
        self.used: dict[str, SimSlot] = {}

    def place(self, entry: Request, now: float) -> SimSlot | None:
        if entry.pin is not None:
            slot = next((s for s in self.slots if s.session == entry.session_id), None)
        else:
            usable = [s for s in self.slots if s.active is None and s.session is None]
            hits = [s for s in usable if entry.history and s.holds == entry.history]
            empties = [s for s in usable if not s.holds]
            slot = (hits or empties or sorted(usable, key=lambda s: s.last) or [None])[0]
            if slot is None:
                return None
            slot.active, slot.last = entry.request_id, now
            if isinstance(entry.cmd, CreateSession):
                slot.holds = b""
        if slot is not None:
            self.used[entry.request_id] = slot
        return slot

    def end(self, entry: Request, ok: bool, holds: bytes) -> SimSlot | None:
        slot = self.used.pop(entry.request_id, None)
        if slot is None or entry.pin is not None:
            return slot
        slot.active = None
        if isinstance(entry.cmd, CreateSession):
            slot.session = entry.session_id if ok else None
        else:
            slot.holds = holds if ok else b""  # a failed request may have evicted or cropped it
        return slot

    def snapshot(self) -> tuple[SlotInfo, ...]:
        return tuple(s.info() for s in self.slots)


class PoolMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = 0.0
        self.pool = Pool(WORKERS, queue_max=6, on_assign=self.on_assign, on_position=self.on_position,
                         clock=lambda: self.clock)
        self.entries: dict[str, Request] = {}
        self.order: list[str] = []  # arrival order of admitted requests
        self.assigned: Counter[str] = Counter()
        self.queued_once: Counter[str] = Counter()
        self.ended: Counter[str] = Counter()
        self.sessions: dict[str, str] = {}  # open session → worker
        self.ending: dict[str, str] = {}  # ended while one of its commands ran → worker
        self.sims = {w: SimWorker(slots) for w, (_, slots) in WORKERS.items()}
        self.convs: dict[str, int] = {}  # chat → its conversation
        self.n = 0

    def teardown(self) -> None:
        try:
            self.drain_everything()
        finally:
            self.loop.close()

    # ------------------------------------------------------------------ callbacks (the checks)

    def on_assign(self, entry: Request) -> None:
        rid = entry.request_id
        self.assigned[rid] += 1
        assert self.assigned[rid] == 1, f"{rid} assigned twice"
        assert self.ended[rid] == 0, f"{rid} assigned after it ended"
        mirror = self.pool.workers[entry.worker_id]
        assert mirror.up and len(mirror.running) <= mirror.capacity
        earlier = self.order[: self.order.index(rid)]
        for other in earlier:
            if not self.pool.is_queued(other):
                continue
            o = self.entries[other]
            assert not (entry.pin is None and o.pin is None), f"FIFO broken: {rid} ran before {other}"
            assert not (entry.session_id and o.session_id == entry.session_id), "session order broken"
        if entry.pin is not None:
            assert entry.worker_id == entry.pin
        placed = self.sims[entry.worker_id].place(entry, self.clock)
        assert placed is not None or entry.pin is not None, f"{entry.worker_id} has no slot for {rid}"

    def on_position(self, entry: Request, first: bool) -> None:
        assert self.pool.is_queued(entry.request_id)
        self.queued_once[entry.request_id] += first
        assert self.queued_once[entry.request_id] == 1

    def end(self, entry: Request) -> None:
        self.ended[entry.request_id] += 1
        assert self.ended[entry.request_id] == 1, f"{entry.request_id} ended twice"

    # ------------------------------------------------------------------ arrivals

    def admit(self, entry: Request) -> None:
        self.n += 1
        self.entries[entry.request_id] = entry
        self.order.append(entry.request_id)
        try:
            self.pool.submit(entry)
        except QueueFullError:
            assert len(self.pool) == self.pool.queue_max
            self.order.remove(entry.request_id)
            del self.entries[entry.request_id]

    @rule(conv=st.integers(0, 5), new=st.booleans())
    def chat(self, conv: int, new: bool) -> None:
        rid = f"c{self.n}"
        history = b"" if new else conv_hash(conv)
        self.convs[rid] = conv
        self.admit(Request(rid, Chat(rid, (Message("user", str(conv)),)), self.loop.create_future(), history=history))

    @rule()
    def create_session(self) -> None:
        rid, sid = f"o{self.n}", f"s{self.n}"
        self.admit(Request(rid, CreateSession(rid, sid), self.loop.create_future()))

    @precondition(lambda self: self.sessions)
    @rule(data=st.data(), burst=st.integers(1, 3))
    def session_commands(self, data: st.DataObject, burst: int) -> None:
        sid = data.draw(st.sampled_from(sorted(self.sessions)))
        for _ in range(burst):
            rid = f"g{self.n}"
            self.admit(Request(rid, Generate(rid, sid), self.loop.create_future(), pin=self.sessions[sid]))

    # ------------------------------------------------------------------ endings

    def live(self) -> list[str]:
        return [r for r in self.order if not self.ended[r]]

    def running(self) -> list[Request]:
        return sorted(self.pool.running(), key=lambda e: e.request_id)

    @precondition(lambda self: any(not self.ended[r] for r in self.order))
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        rid = data.draw(st.sampled_from(self.live()))
        entry = self.pool.cancel(rid)
        if entry is not None:
            self.end(entry)  # a running one would get Stop and end by finish()

    @precondition(lambda self: self.pool.running())
    @rule(data=st.data(), ok=st.booleans(), report=st.sampled_from(["snapshot", "slot", "nothing"]))
    def finish(self, data: st.DataObject, ok: bool, report: str) -> None:
        entry = data.draw(st.sampled_from(self.running()))
        self.clock += data.draw(st.floats(0, 5))
        self.release(entry, ok, report)

    def release(self, entry: Request, ok: bool = True, report: str = "snapshot") -> None:
        """The worker's terminal event: a Done with its snapshot, or naming only its slot (a host
        without snapshots; a session's opening is always reported), or an error (nothing)."""
        conv = self.convs.get(entry.request_id)
        holds = conv_hash(conv) if conv is not None else b""
        slot = self.sims[entry.worker_id].end(entry, ok, holds)
        if not ok:
            released = self.pool.release(entry.request_id, ok=False)
        elif report == "snapshot":
            released = self.pool.release(entry.request_id, self.sims[entry.worker_id].snapshot())
        elif report == "slot" or isinstance(entry.cmd, CreateSession):
            released = self.pool.release(entry.request_id, slot=slot.index if slot else -1,
                                         hashes=(holds,) if conv is not None else None)
        else:
            released = self.pool.release(entry.request_id)
        assert released is entry
        self.end(entry)
        if ok and isinstance(entry.cmd, CreateSession):
            self.sessions[entry.cmd.session_id] = entry.worker_id
        sid = entry.session_id
        if sid in self.ending and not any(e.session_id == sid for e in self.pool.running()):
            self.forget(self.ending.pop(sid), sid)

    def forget(self, worker: str, sid: str) -> None:
        for slot in self.sims[worker].slots:
            if slot.session == sid:
                slot.session = None
        self.pool.forget_session(worker, sid)

    @precondition(lambda self: self.sessions)
    @rule(data=st.data())
    def end_session(self, data: st.DataObject) -> None:
        sid = data.draw(st.sampled_from(sorted(self.sessions)))
        worker = self.sessions.pop(sid)
        for rid in self.live():
            if self.entries[rid].session_id == sid and (entry := self.pool.cancel(rid)) is not None:
                self.end(entry)
        if any(e.session_id == sid for e in self.pool.running()):
            self.ending[sid] = worker  # ended once its running command ends
        else:
            self.forget(worker, sid)

    # ------------------------------------------------------------------ workers

    @initialize()
    def some_workers_loaded(self) -> None:
        for worker in ("w0", "w1"):  # w2 is still loading
            self.worker_up(worker, WorkerState.IDLE)

    @rule(worker=st.sampled_from(sorted(WORKERS)), state=st.sampled_from([WorkerState.IDLE, WorkerState.BUSY]))
    def worker_up(self, worker: str, state: WorkerState) -> None:
        capacity, slots = WORKERS[worker]
        assert self.pool.set_status(WorkerStatus(worker, state, capacity=capacity, num_slots=slots)) == []

    @rule(worker=st.sampled_from(sorted(WORKERS)), state=st.sampled_from([WorkerState.ERROR, WorkerState.LOADING]))
    def worker_down(self, worker: str, state: WorkerState) -> None:
        was_running = {e.request_id for e in self.pool.running(worker)}
        failed = self.pool.set_status(WorkerStatus(worker, state))
        assert was_running <= {e.request_id for e in failed}
        for entry in failed:
            assert entry.worker_id == worker or entry.pin == worker
            self.end(entry)
        self.sims[worker] = SimWorker(WORKERS[worker][1])  # its KV died with it
        for sid in [s for s, w in self.sessions.items() if w == worker]:
            del self.sessions[sid]
        for sid in [s for s, w in self.ending.items() if w == worker]:
            del self.ending[sid]

    # ------------------------------------------------------------------ invariants

    @invariant()
    def accounting(self) -> None:
        queued = {e.request_id for e in self.pool.queued()}
        running = {e.request_id for e in self.pool.running()}
        assert not queued & running
        assert set(self.live()) == queued | running, "a request was lost"
        assert [e.position for e in self.pool.queued()] == list(range(1, len(queued) + 1))
        for e in self.pool.queued():
            assert e.pin is None or self.sessions.get(e.session_id) == e.pin, "waits for a dead session"
        sessions_running = [e.session_id for e in self.pool.running() if e.session_id]
        assert len(sessions_running) == len(set(sessions_running)), "two commands of one session at once"

    @invariant()
    def capacity_and_slots(self) -> None:
        for w in self.pool.workers.values():
            assert set(w.running) == {e.request_id for e in self.pool.running(w.worker_id)}
            assert len(w.running) <= w.capacity and (w.up or not w.running)
            assert [s.index for s in w.slots] == list(range(len(w.slots)))
            takers = [e for e in self.pool.running(w.worker_id) if e.pin is None]
            assert len(takers) <= sum(1 for s in self.sims[w.worker_id].slots if s.session is None)

    @invariant()
    def work_conserving(self) -> None:
        """Nothing waits while a worker could take it."""
        if any(e.pin is None for e in self.pool.queued()):
            assert not any(w.free > 0 and w.lru_slot() is not None for w in self.pool.workers.values())
        busy = {e.session_id for e in self.pool.running()}
        for e in self.pool.queued():
            if e.pin is not None and e.session_id not in busy:
                assert self.pool.workers[e.pin].free == 0

    # ------------------------------------------------------------------ the end

    def drain_everything(self) -> None:
        """Bring every worker up and finish whatever runs until nothing is left: each admitted
        request must then have ended exactly once."""
        for worker, (capacity, slots) in WORKERS.items():
            self.pool.set_status(WorkerStatus(worker, WorkerState.IDLE, capacity=capacity, num_slots=slots))
        for _ in range(10_000):
            if not self.pool.running():
                if not len(self.pool):
                    break
                for sid, worker in list(self.sessions.items()):  # pinned slots may starve chats
                    del self.sessions[sid]
                    self.forget(worker, sid)
                if not self.pool.running():
                    break
            self.release(self.running()[0])
        assert not self.pool.running() and not len(self.pool), "requests left over"
        assert all(self.ended[r] == 1 for r in self.order), "a request never ended"
        assert all(self.assigned[r] <= 1 for r in self.order)


PoolMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
test_pool_state_machine = PoolMachine.TestCase
