"""Deterministic unit tests of the pool and the slot mirror, without a gateway or hosts. Slots
change only from what a worker reports (`release` with a snapshot, or with the slot its Done
named); routing reads them and counts the requests in flight, but never edits them."""

from __future__ import annotations

import asyncio

import pytest

from desktop.gateway.eta import ServiceTimes, Waits
from desktop.gateway.mirror import Route, WorkerMirror
from desktop.gateway.pool import Pool
from desktop.gateway.request import Request
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

    def assign(self, e: Request) -> None:
        self.assigned.append(e.request_id)

    def position(self, e: Request, first: bool) -> None:
        self.positions.append((e.request_id, e.position, first))


def make_pool(workers: dict[str, tuple[int, int]], rec: Recorder, **kw) -> Pool:
    pool = Pool(workers, queue_max=kw.pop("queue_max", 10), on_assign=rec.assign, on_position=rec.position, **kw)
    for w, (cap, slots) in workers.items():
        pool.set_status(WorkerStatus(w, WorkerState.IDLE, capacity=cap, num_slots=slots))
    return pool


def chat(loop, rid: str, history: bytes = b"") -> Request:
    return Request(rid, Chat(rid, (Message("user", rid),)), loop.create_future(), history=history)


def held(index: int, *hashes: bytes, state: str = "idle", session: str | None = None) -> SlotInfo:
    """One slot as a worker's snapshot reports it."""
    return SlotInfo(index, state, hashes, 10 if hashes else 0, 0.0, session, 0)


def generate(loop, rid: str, sid: str, worker: str) -> Request:
    return Request(rid, Generate(rid, sid), loop.create_future(), pin=worker)


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
    pool.release("a", slot=0, hashes=(b"a",))  # each worker reports the slot it used (no snapshot)
    pool.release("b", slot=0, hashes=(b"b",))
    pool.submit(chat(loop, "a2", history=b"a"))
    (a2,) = pool.running()
    assert a2.route is Route.HIT and a2.worker_id == "w1"
    pool.release("a2", slot=0, hashes=(b"a", b"a2"))
    pool.submit(chat(loop, "c"))
    (c,) = pool.running()
    assert c.route is Route.EVICT and c.worker_id == "w2"  # b was used least recently


def test_a_slot_held_by_a_running_request_is_not_a_hit(loop) -> None:
    rec = Recorder()
    pool = make_pool({"w1": (2, 2), "w2": (1, 1)}, rec)
    pool.submit(chat(loop, "a"))
    pool.release("a", (held(0, b"a"), held(1)))
    pool.submit(chat(loop, "a2", history=b"a"))
    pool.submit(chat(loop, "a3", history=b"a"))  # a2 was sent to hit the slot holding a: it takes it
    assert [(e.request_id, e.route, e.worker_id) for e in pool.running()] == [
        ("a2", Route.HIT, "w1"), ("a3", Route.FREE, "w1")]
    pool.release("a3", (held(0, b"a", b"a2", state="busy"), held(1, b"a", b"a3")))
    pool.submit(chat(loop, "a4", history=b"a"))  # the snapshot shows a2 in slot 0: slot 1 holds a
    assert pool.running()[-1].route is Route.HIT


def test_dispatch_leaves_the_slots_as_the_worker_last_reported(loop) -> None:
    rec = Recorder()
    pool = make_pool({"w": (2, 2)}, rec, clock=iter(range(1000)).__next__)
    pool.submit(chat(loop, "a"))
    pool.release("a", (held(0, b"a"), held(1)), slot=0)
    mirror = pool.workers["w"]
    before, used_at, stats = list(mirror.slots), dict(mirror.used_at), pool.worker_stats()
    pool.submit(chat(loop, "a2", history=b"a"))
    pool.submit(chat(loop, "b"))
    assert [e.route for e in pool.running()] == [Route.HIT, Route.FREE]
    assert mirror.slots == before and mirror.used_at == used_at
    assert [s["in_use"] for s in pool.worker_stats()[0]["slots"]] == [False, False]
    assert pool.worker_stats()[0]["in_flight"] == 2 and stats[0]["in_flight"] == 0
    pool.release("b", slot=1, hashes=(b"b",))  # now the worker has said where b went
    assert mirror.slots[1].hashes == (b"b",) and mirror.slots[0] == before[0] and 1 in mirror.used_at


def test_in_use_comes_from_the_workers_snapshot(loop) -> None:
    rec = Recorder()
    pool = make_pool({"w": (2, 3)}, rec)
    pool.submit(chat(loop, "a"))
    pool.submit(chat(loop, "b"))
    pool.release("a", (held(0, b"a"), held(1), held(2, b"b", state="busy")))  # the worker put b in slot 2
    assert [s["in_use"] for s in pool.worker_stats()[0]["slots"]] == [False, False, True]
    pool.release("b", (held(0, b"a"), held(1), held(2, b"b", b"reply")))
    assert [s["in_use"] for s in pool.worker_stats()[0]["slots"]] == [False, False, False]


def test_requests_in_flight_are_counted_against_the_free_slots(loop) -> None:
    """Routed before any Done: the second new conversation does not count on the empty slot the
    first will take; capacity without a slot to count on is no place to go."""
    rec = Recorder()
    pool = make_pool({"w1": (3, 2), "w2": (1, 1)}, rec)
    for rid in "abcd":
        pool.submit(chat(loop, rid))
    assert [(e.request_id, e.worker_id, e.route) for e in pool.running()] == [
        ("a", "w1", Route.FREE), ("b", "w1", Route.FREE), ("c", "w2", Route.FREE)]
    assert pool.is_queued("d") and pool.workers["w1"].free == 1
    pool.release("c", (held(0, b"c"),))
    assert pool.running()[-1].request_id == "d" and pool.running()[-1].route is Route.EVICT


def test_a_hit_in_flight_leaves_the_empty_slot_to_count_on(loop) -> None:
    rec = Recorder()
    pool = make_pool({"w1": (2, 2), "w2": (2, 2)}, rec)
    pool.submit(chat(loop, "a"))
    pool.release("a", (held(0, b"a"), held(1)))
    pool.submit(chat(loop, "b"))  # goes to w2 (more room), then a2 hits on w1
    pool.submit(chat(loop, "a2", history=b"a"))
    pool.submit(chat(loop, "c"))  # w1: a2 takes slot 0, slot 1 is still empty; w2: b takes one of two
    assert [(e.request_id, e.worker_id, e.route) for e in pool.running()] == [
        ("b", "w2", Route.FREE), ("a2", "w1", Route.HIT), ("c", "w1", Route.FREE)]


def test_a_stale_in_use_mark_does_not_hold_a_slot_when_nothing_runs(loop) -> None:
    """A request that failed (no snapshot) after a snapshot showed it in use: once nothing runs
    there the mark is ignored, so the worker's only slot is not lost to routing."""
    rec = Recorder()
    pool = make_pool({"w": (2, 1)}, rec)
    pool.submit(Request("o", CreateSession("o", "s"), loop.create_future()))
    pool.release("o", (held(0, state="busy"),))  # stale: a chat the worker never reported on
    pool.submit(chat(loop, "x"))
    assert rec.assigned == ["o", "x"]
    assert pool.release("x", ok=False) is not None  # an error names no slot: nothing changes
    assert pool.workers["w"].slots == [held(0, state="busy")]


def test_create_session_pins_its_slot_against_eviction(loop) -> None:
    rec = Recorder()
    pool = make_pool({"w": (1, 1)}, rec)
    pool.submit(Request("o", CreateSession("o", "s"), loop.create_future()))
    pool.release("o", slot=0)  # no snapshot: the slot its Done named is the session's
    assert pool.workers["w"].slots[0].session_id == "s"
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


def test_a_new_call_goes_where_it_costs_chats_no_cache_and_chats_then_avoid_it(loop) -> None:
    """Issue 10: a voice call's session is placed on the worker whose slots hold the fewest chats
    (even with less capacity free); that worker is then DUPLEX_ACTIVE (PAUSED when its calls
    are), and new chats go to the other worker while they can."""
    rec = Recorder()
    pool = make_pool({"w1": (4, 4), "w2": (2, 4)}, rec)
    pool.workers["w1"].slots = [held(0, b"a"), held(1, b"b"), held(2), held(3)]  # w1 caches two chats
    call = Request("c", CreateSession("c", "s1"), loop.create_future(), call=True)
    pool.submit(call)
    assert call.worker_id == "w2"  # w1 has more room, but its cache would be pushed out
    pool.release("c", slot=0)
    pool.mark_call("w2", "s1", paused=False)
    assert [w["state"] for w in pool.worker_stats()] == ["idle", "duplex_active"]
    pool.mark_call("w2", "s1", paused=True)
    assert pool.worker_stats()[1]["state"] == "duplex_paused" and pool.worker_stats()[1]["calls"] == 1
    pool.forget_session("w2", "s1")
    assert pool.worker_stats()[1]["state"] == "idle"
    roomy = make_pool({"w1": (2, 4), "w2": (4, 4)}, Recorder())
    roomy.mark_call("w2", "s2", paused=False)
    fresh = chat(loop, "fresh")
    roomy.submit(fresh)
    assert fresh.worker_id == "w1"  # empty slots on both, more room on w2: but w2 has a live call
    roomy.mark_call("w2", "s2", paused=True)
    later = chat(loop, "later")
    roomy.submit(later)
    assert later.worker_id == "w2"  # a paused call does not keep chats away
