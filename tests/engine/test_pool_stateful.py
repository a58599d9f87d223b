"""A randomized stateful test of the pool: arrivals, cancels, finishes, slot corrections, worker
crashes and recoveries in any order. Nothing is lost or assigned twice, capacity and slots are
never over-committed, FIFO holds, and every request ends exactly once."""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter

from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from desktop.engine.pool import Entry, Pool
from desktop.protocol import Chat, CreateSession, Generate
from desktop.errors import QueueFullError
from desktop.model.messages import Message
from desktop.protocol import WorkerState, WorkerStatus

WORKERS = {"w0": (1, 1), "w1": (2, 2), "w2": (2, 3)}  # id → (capacity, slots)


def conv_hash(conv: int) -> bytes:
    return hashlib.sha256(bytes([conv])).digest()


class PoolMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = 0.0
        self.pool = Pool(WORKERS, queue_max=6, on_assign=self.on_assign, on_position=self.on_position,
                         clock=lambda: self.clock)
        self.entries: dict[str, Entry] = {}
        self.order: list[str] = []  # arrival order of admitted requests
        self.assigned: Counter[str] = Counter()
        self.queued_once: Counter[str] = Counter()
        self.ended: Counter[str] = Counter()
        self.sessions: dict[str, str] = {}  # open session → worker
        self.n = 0

    def teardown(self) -> None:
        try:
            self.drain_everything()
        finally:
            self.loop.close()

    # ------------------------------------------------------------------ callbacks (the checks)

    def on_assign(self, entry: Entry) -> None:
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

    def on_position(self, entry: Entry, first: bool) -> None:
        assert self.pool.is_queued(entry.request_id)
        self.queued_once[entry.request_id] += first
        assert self.queued_once[entry.request_id] == 1

    def end(self, entry: Entry) -> None:
        self.ended[entry.request_id] += 1
        assert self.ended[entry.request_id] == 1, f"{entry.request_id} ended twice"

    # ------------------------------------------------------------------ arrivals

    def admit(self, entry: Entry) -> None:
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
        self.admit(Entry(rid, Chat(rid, (Message("user", str(conv)),)), self.loop.create_future(),
                         history=history, hashes=(conv_hash(conv),)))

    @rule()
    def create_session(self) -> None:
        rid, sid = f"o{self.n}", f"s{self.n}"
        self.admit(Entry(rid, CreateSession(rid, sid), self.loop.create_future(), session_id=sid))

    @precondition(lambda self: self.sessions)
    @rule(data=st.data(), burst=st.integers(1, 3))
    def session_commands(self, data: st.DataObject, burst: int) -> None:
        sid = data.draw(st.sampled_from(sorted(self.sessions)))
        for _ in range(burst):
            rid = f"g{self.n}"
            self.admit(Entry(rid, Generate(rid, sid), self.loop.create_future(), pin=self.sessions[sid], session_id=sid))

    # ------------------------------------------------------------------ endings

    def live(self) -> list[str]:
        return [r for r in self.order if not self.ended[r]]

    def running(self) -> list[Entry]:
        return sorted(self.pool.running(), key=lambda e: e.request_id)

    @precondition(lambda self: any(not self.ended[r] for r in self.order))
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        rid = data.draw(st.sampled_from(self.live()))
        entry = self.pool.cancel(rid)
        if entry is not None:
            self.end(entry)  # a running one would get Stop and end by finish()

    @precondition(lambda self: self.pool.running())
    @rule(data=st.data(), ok=st.booleans())
    def finish(self, data: st.DataObject, ok: bool) -> None:
        entry = data.draw(st.sampled_from(self.running()))
        self.clock += data.draw(st.floats(0, 5))
        released = self.pool.release(entry.request_id, ok=ok)
        assert released is entry
        self.end(entry)
        if ok and isinstance(entry.cmd, CreateSession):
            self.sessions[entry.cmd.session_id] = entry.worker_id

    @precondition(lambda self: any(e.slot is not None for e in self.pool.running()))
    @rule(data=st.data())
    def worker_used_another_slot(self, data: st.DataObject) -> None:
        entry = data.draw(st.sampled_from([e for e in self.running() if e.slot is not None]))
        mirror = self.pool.workers[entry.worker_id]
        choices = [s.index for s in mirror.slots if s.session_id is None or s.index in mirror.reserved]
        self.pool.note_slot(entry.request_id, data.draw(st.sampled_from(choices)))  # never another session's

    @precondition(lambda self: self.sessions)
    @rule(data=st.data())
    def end_session(self, data: st.DataObject) -> None:
        sid = data.draw(st.sampled_from(sorted(self.sessions)))
        worker = self.sessions.pop(sid)
        for rid in self.live():
            if self.entries[rid].session_id == sid and (entry := self.pool.cancel(rid)) is not None:
                self.end(entry)
        if not any(e.session_id == sid for e in self.pool.running()):
            self.pool.forget_session(worker, sid)

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
        for sid in [s for s, w in self.sessions.items() if w == worker]:
            del self.sessions[sid]

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
            held = {rid: slot for rid, slot in w.running.items() if slot is not None}
            assert {slot: rid for rid, slot in held.items()} == w.reserved, "slot double-booked"
            assert [s.index for s in w.slots] == list(range(len(w.slots)))

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
                    self.pool.forget_session(worker, sid)
                if not self.pool.running():
                    break
            entry = self.running()[0]
            self.pool.release(entry.request_id)
            self.end(entry)
            if isinstance(entry.cmd, CreateSession):
                self.sessions[entry.cmd.session_id] = entry.worker_id
        assert not self.pool.running() and not len(self.pool), "requests left over"
        assert all(self.ended[r] == 1 for r in self.order), "a request never ended"
        assert all(self.assigned[r] <= 1 for r in self.order)


PoolMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
test_pool_state_machine = PoolMachine.TestCase
