"""Deterministic unit tests of the pool and the slot mirror, without a gateway or hosts."""

from __future__ import annotations

import asyncio

import pytest

from desktop.engine.eta import ServiceTimes, Waits
from desktop.engine.mirror import Route, WorkerMirror
from desktop.engine.pool import Entry, Pool
from desktop.protocol import Chat, CreateSession, Generate, SlotInfo
from desktop.model.messages import Message
from desktop.protocol import WorkerState, WorkerStatus


@pytest.fixture
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


class Recorder:
    def __init__(self) -> None:
        self.assigned: list[str] = []
        self.positions: list[tuple[str, int, bool]] = []

    def assign(self, e: Entry) -> None:
        self.assigned.append(e.request_id)

    def position(self, e: Entry, first: bool) -> None:
        self.positions.append((e.request_id, e.position, first))


def make_pool(workers: dict[str, tuple[int, int]], rec: Recorder, **kw) -> Pool:
    pool = Pool(workers, queue_max=kw.pop("queue_max", 10), on_assign=rec.assign, on_position=rec.position, **kw)
    for w, (cap, slots) in workers.items():
        pool.set_status(WorkerStatus(w, WorkerState.IDLE, capacity=cap, num_slots=slots))
    return pool


def chat(loop, rid: str, history: bytes = b"") -> Entry:
    return Entry(rid, Chat(rid, (Message("user", rid),)), loop.create_future(), history=history, hashes=(rid.encode(),))


def generate(loop, rid: str, sid: str, worker: str) -> Entry:
    return Entry(rid, Generate(rid, sid), loop.create_future(), pin=worker, session_id=sid)


def test_fifo_and_capacity_taken_at_assignment(loop) -> None:
    rec = Recorder()
    pool = make_pool({"w": (2, 4)}, rec)
    for rid in "abcd":
        pool.submit(chat(loop, rid))
    assert rec.assigned == ["a", "b"] and [e.request_id for e in pool.queued()] == ["c", "d"]
    assert rec.positions == [("c", 1, True), ("d", 2, True)]
    pool.release("b")
    assert rec.assigned == ["a", "b", "c"] and rec.positions[-1] == ("d", 1, False)


def test_a_session_runs_one_command_at_a_time_in_order(loop) -> None:
    rec = Recorder()
    pool = make_pool({"w": (3, 4)}, rec)
    for rid in ("g1", "g2", "g3"):
        pool.submit(generate(loop, rid, "s", "w"))
    pool.submit(generate(loop, "other", "t", "w"))
    assert rec.assigned == ["g1", "other"]
    pool.release("g1")
    assert rec.assigned == ["g1", "other", "g2"]


def test_routing_order_hit_then_free_then_lru(loop) -> None:
    rec = Recorder()
    clock = iter(range(1000)).__next__
    pool = make_pool({"w1": (1, 1), "w2": (1, 1)}, rec, clock=clock)
    pool.submit(chat(loop, "a"))
    pool.submit(chat(loop, "b"))
    assert [e.route for e in pool.running()] == [Route.FREE, Route.FREE]
    pool.release("a")
    pool.release("b")
    pool.submit(chat(loop, "a2", history=b"a"))
    (a2,) = pool.running()
    assert a2.route is Route.HIT and a2.worker_id == "w1"
    pool.release("a2")
    pool.submit(chat(loop, "c"))
    (c,) = pool.running()
    assert c.route is Route.EVICT and c.worker_id == "w2"  # b was used least recently


def test_a_slot_held_by_a_running_request_is_not_a_hit(loop) -> None:
    rec = Recorder()
    pool = make_pool({"w1": (2, 2)}, rec)
    pool.submit(chat(loop, "a"))
    pool.submit(chat(loop, "a2", history=b"a"))  # a is still running in the slot that holds it
    assert [e.route for e in pool.running()] == [Route.FREE, Route.FREE]
    assert sorted(e.slot for e in pool.running()) == [0, 1]


def test_create_session_pins_its_slot_against_eviction(loop) -> None:
    rec = Recorder()
    pool = make_pool({"w": (1, 1)}, rec)
    pool.submit(Entry("o", CreateSession("o", "s"), loop.create_future(), session_id="s"))
    pool.release("o")
    pool.submit(chat(loop, "x"))
    assert pool.is_queued("x")
    pool.forget_session("w", "s")
    assert rec.assigned == ["o", "x"]


def test_down_worker_fails_its_work_and_comes_back_empty(loop) -> None:
    rec = Recorder()
    pool = make_pool({"w": (1, 2)}, rec)
    pool.submit(chat(loop, "a"))
    pool.submit(generate(loop, "g", "s", "w"))
    pool.submit(chat(loop, "b"))
    failed = pool.set_status(WorkerStatus("w", WorkerState.ERROR, "boom"))
    assert sorted(e.request_id for e in failed) == ["a", "g"]
    assert [e.request_id for e in pool.queued()] == ["b"] and rec.assigned == ["a"]
    pool.set_status(WorkerStatus("w", WorkerState.IDLE, capacity=1, num_slots=3))
    assert rec.assigned == ["a", "b"] and len(pool.workers["w"].slots) == 3


def test_mirror_follows_the_slot_the_worker_chose() -> None:
    m = WorkerMirror("w", state=WorkerState.IDLE, capacity=2)
    m.reset(num_slots=3, capacity=2)
    held = SlotInfo(2, "idle", (b"old",), 5, 0.0, None, 0)
    m.slots[2] = held
    m.take("a", 0, (b"a",), None, now=1.0)
    m.move("a", 2)  # it evicted slot 2 instead of using empty slot 0
    assert m.running == {"a": 2} and m.reserved == {2: "a"}
    assert m.slots[0].hashes == () and m.slots[2].hashes == (b"a",)
    m.take("b", 0, (b"b",), None, now=2.0)
    m.move("b", 2)  # crossed predictions: a and b swap
    assert m.running == {"a": 0, "b": 2} and m.reserved == {0: "a", 2: "b"}
    m.release("a", (), ok=False, hashes=None, now=3.0)  # a failed: its slot is as it was (empty)
    assert m.slots[0].hashes == () and m.reserved == {2: "b"}
    m.release("b", (), ok=True, hashes=(b"b", b"reply"), now=4.0)
    assert m.slots[2].hashes == (b"b", b"reply") and not m.reserved


def test_eta_and_wait_percentiles() -> None:
    times = ServiceTimes(window=2, prior_s=3.0)
    assert times.eta(2, 3) == 2.0
    for s in (1.0, 2.0, 4.0):
        times.add(s)
    assert times.mean_s == 3.0 and times.eta(1, 2) == 1.5
    waits = Waits()
    assert waits.percentile(95) == 0.0
    for ms in range(1, 101):
        waits.add(float(ms))
    assert waits.percentile(50) == 50.0 and waits.percentile(95) == 95.0 and waits.percentile(100) == 100.0
