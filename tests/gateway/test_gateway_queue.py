"""The gateway's queue as a client sees it: full queue, positions and ETAs, cancel while queued
or running, unknown request ids, shutdown, workers that are still loading."""

from __future__ import annotations

import asyncio

import pytest

from desktop.gateway.gateway import Gateway
from desktop.protocol import Chat, ChunkEvent, Done, ErrorEvent, PrefillDone, QueueDone, Queued, QueueUpdate, Stop
from desktop.errors import InvalidRequest, QueueFullError, UnknownRequest
from fake_host import FakeHost
from gw_helpers import collect, gateway, run, settle, take, terminal, user


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_queue_full_raises_a_clear_error_and_frees_up_again() -> None:
    async def main() -> None:
        host = FakeHost("w1")
        async with gateway(host, queue_max=2) as gw:
            running = gw.chat([user("1")])
            queued = [gw.chat([user("2")]), gw.chat([user("3")])]
            with pytest.raises(QueueFullError, match="queue is full") as err:
                gw.chat([user("4")])
            assert err.value.retryable and err.value.code == "queue_full"
            assert gw.stats().queue.length == 2 and gw.stats().requests.submitted == 3
            await settle()
            host.finish(running.request_id)
            await settle()
            gw.chat([user("5")])  # room again: one entry left the queue
            assert [type(e) for e in await take(queued[0], 2)] == [Queued, QueueDone]
    run(main())


def test_queue_max_zero_still_runs_what_can_run_at_once() -> None:
    async def main() -> None:
        host = FakeHost("w1")
        async with gateway(host, queue_max=0) as gw:
            s = gw.chat([user("1")])
            with pytest.raises(QueueFullError):
                gw.chat([user("2")])
            await settle()
            host.finish(s.request_id)
            assert [type(e) for e in await collect(s)] == [PrefillDone, ChunkEvent, Done]  # no queue events
    run(main())


def test_positions_and_eta_follow_the_queue() -> None:
    async def main() -> None:
        clock = Clock()
        host = FakeHost("w1", capacity=1)
        gw = Gateway([host], clock=clock)
        await gw.start()
        await gw.wait_ready(1)
        s1, s2, s3 = gw.chat([user("1")]), gw.chat([user("2")]), gw.chat([user("3")])
        assert await take(s2) == [Queued(s2.request_id, 1, 2.0)]  # prior: 2 s per request, capacity 1
        assert await take(s3) == [Queued(s3.request_id, 2, 4.0)]
        assert gw.stats().queue.eta_avg_s == 3.0
        await settle()
        clock.t += 1.0
        host.finish(s1.request_id)  # one sample of 1 s: the average is now 1 s
        assert await take(s2) == [QueueDone(s2.request_id, 1000.0)]
        assert await take(s3) == [QueueUpdate(s3.request_id, 1, 1.0)]
        await settle()
        host.finish(s2.request_id)
        assert terminal(await collect(s2)).stats.queue_ms == 1000.0
        q = gw.stats().queue
        assert q.service_avg_s == 0.5 and q.wait_ms_p50 == 1000.0 and q.wait_ms_p95 == 1000.0
        await gw.close()
    run(main())


def test_eta_divides_by_total_capacity() -> None:
    async def main() -> None:
        hosts = (FakeHost("w1", capacity=2, num_slots=2), FakeHost("w2", capacity=2, num_slots=2))
        async with gateway(*hosts) as gw:
            for i in range(4):
                gw.chat([user(str(i))])
            waiting = gw.chat([user("5")])
            assert await take(waiting) == [Queued(waiting.request_id, 1, 0.5)]  # 2 s / 4 sequences
    run(main())


def test_cancel_while_queued_removes_it_and_moves_the_others_up() -> None:
    async def main() -> None:
        host = FakeHost("w1")
        async with gateway(host) as gw:
            s1, s2, s3 = gw.chat([user("1")]), gw.chat([user("2")]), gw.chat([user("3")])
            await gw.cancel(s2.request_id)
            events = await collect(s2)
            assert [type(e) for e in events] == [Queued, Done]
            assert events[-1].stats.finish_reason == "cancelled"
            assert [type(e) for e in await take(s3, 2)] == [Queued, QueueUpdate]
            assert s3.request_id and gw.stats().queue.length == 1
            await settle()
            host.finish(s1.request_id)
            await settle()
            host.finish(s3.request_id)
            await collect(s3)
            assert [c.request_id for c in host.commands if isinstance(c, Chat)] == [s1.request_id, s3.request_id]
            assert gw.stats().requests.cancelled == 1
    run(main())


def test_cancel_while_generating_sends_stop_to_the_worker() -> None:
    async def main() -> None:
        host = FakeHost("w1")
        async with gateway(host) as gw:
            s = gw.chat([user("1")])
            await settle()
            await gw.cancel(s.request_id)
            await gw.cancel(s.request_id)  # twice before the worker answers: one Stop
            assert [c for c in host.commands if isinstance(c, Stop)] == [Stop(s.request_id)]
            end = terminal(await collect(s))
            assert isinstance(end, Done) and end.stats.finish_reason == "cancelled"
            assert gw.stats().requests.cancelled == 1
            await settle()
            assert gw.stats().workers[0].in_flight == 0
    run(main())


def test_unknown_and_finished_request_ids_raise_unknown_request() -> None:
    async def main() -> None:
        host = FakeHost("w1", auto=0.0)
        async with gateway(host) as gw:
            with pytest.raises(UnknownRequest, match="not queued or running"):
                await gw.cancel("nope")
            s = gw.chat([user("1")])
            await collect(s)
            with pytest.raises(UnknownRequest):
                await gw.cancel(s.request_id)
    run(main())


def test_a_request_id_in_use_is_refused_and_one_that_ended_can_be_reused() -> None:
    async def main() -> None:
        host = FakeHost("w1", auto=0.0)
        async with gateway(host) as gw:
            s = gw.chat([user("1")], request_id="r1")
            with pytest.raises(InvalidRequest, match="already in use"):
                gw.chat([user("2")], request_id="r1")
            await collect(s)
            assert isinstance(terminal(await collect(gw.chat([user("2")], request_id="r1"))), Done)
    run(main())


def test_bad_messages_are_refused_before_queueing() -> None:
    async def main() -> None:
        async with gateway(FakeHost("w1")) as gw:
            with pytest.raises(InvalidRequest, match="empty"):
                gw.chat([])
            assert gw.stats().requests.submitted == 0
    run(main())


def test_aclose_cancels_a_live_request() -> None:
    async def main() -> None:
        host = FakeHost("w1")
        async with gateway(host) as gw:
            s1, s2 = gw.chat([user("1")]), gw.chat([user("2")])
            await s2.aclose()
            assert gw.stats().requests.cancelled == 1 and gw.stats().queue.length == 0
            assert [e async for e in s2] == []
            await settle()
            await s1.aclose()
            await settle()
            assert Stop(s1.request_id) in host.commands
    run(main())


def test_requests_wait_for_a_loading_worker() -> None:
    async def main() -> None:
        host = FakeHost("w1", ready=False)
        gw = Gateway([host])
        await gw.start()
        s = gw.chat([user("1")])
        assert [type(e) for e in await take(s)] == [Queued]
        with pytest.raises(asyncio.TimeoutError):
            await gw.wait_ready(timeout=0.05)
        host.recover()
        assert await gw.wait_ready(timeout=1)
        assert [type(e) for e in await take(s, 2)] == [QueueDone, PrefillDone]
        await gw.close()
        assert isinstance(terminal(await collect(s)), ErrorEvent)
    run(main())


def test_close_fails_queued_and_running_requests() -> None:
    async def main() -> None:
        host = FakeHost("w1")
        gw = Gateway([host])
        await gw.start()
        await gw.wait_ready(1)
        s1, s2 = gw.chat([user("1")]), gw.chat([user("2")])
        await settle()
        await gw.close()
        for s in (s1, s2):
            end = terminal(await collect(s))
            assert isinstance(end, ErrorEvent) and end.code == "shutdown"
        assert host.closed
        with pytest.raises(Exception, match="shutting down"):
            gw.chat([user("3")])
    run(main())


def test_threaded_hosts_serve_many_concurrent_chats() -> None:
    async def main() -> None:
        hosts = (FakeHost("w1", capacity=2, num_slots=3, auto=0.002),
                 FakeHost("w2", capacity=3, num_slots=3, auto=0.001))
        async with gateway(*hosts, queue_max=100) as gw:
            streams = [gw.chat([user(f"c{i}")]) for i in range(40)]
            ends = await asyncio.gather(*(collect(s) for s in streams))
            assert all(isinstance(terminal(e), Done) for e in ends)
            assert not any(h.violations for h in hosts)
            st = gw.stats()
            assert st.requests.completed == 40 and st.queue.length == 0
            assert all(w.in_flight == 0 for w in st.workers)
    run(main())


def test_moves_up_within_the_period_reach_a_waiting_request_as_one_update() -> None:
    """Each start moves every waiting request: within position_every_s the last one waiting
    hears only where it ends up; with 0 it hears every move."""
    async def positions(every_s: float) -> list:
        host = FakeHost("w1", capacity=1)
        async with gateway(host, position_every_s=every_s) as gw:
            streams = [gw.chat([user(str(i))]) for i in range(5)]
            last = streams[-1]
            assert await take(last) == [Queued(last.request_id, 4, 8.0)]
            for s in streams[:3]:  # three starts in a row, well inside the period
                await settle()
                host.finish(s.request_id)
                await settle()
            await asyncio.sleep(every_s * 1.5)
            moves = []
            while not moves or moves[-1] > 1:
                event = (await take(last))[0]
                assert isinstance(event, QueueUpdate), event
                moves.append(event.position)
            for s in streams[3:]:
                await gw.cancel(s.request_id)
            return moves

    assert run(positions(0.2)) == [1]
    assert run(positions(0.0)) == [3, 2, 1]
