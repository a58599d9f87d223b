"""The gateway's event observers (what feeds the admin monitor, without wrapping any host): every
event of a host in the pool, on the loop, before the gateway acts on it; one that raises costs a
log line, never a request; a removed host is no longer heard. The engine monitor built on them
keeps each worker's status, its last slot snapshot and the request counters."""

from __future__ import annotations

import asyncio
import logging

from desktop.gateway.gateway import Gateway
from desktop.gateway.monitor import EngineMonitor
from desktop.protocol import ChunkEvent, Done, ErrorEvent, PrefillDone, WorkerState, WorkerStatus
from fake_host import FakeHost
from gw_helpers import collect, run, settle, terminal, user


def test_observers_hear_every_event_of_the_pool_before_the_gateway_acts_on_it(caplog) -> None:
    async def main() -> None:
        a, b = FakeHost("a"), FakeHost("b")
        gw = Gateway([a, b])
        heard: list[tuple[str, object, int]] = []
        loop = asyncio.get_running_loop()

        def observe(worker_id: str, event: object) -> None:
            assert asyncio.get_running_loop() is loop
            heard.append((worker_id, event, gw.stats().requests.completed))  # counted after the observers

        gw.event_observers.append(lambda worker_id, event: 1 / 0)  # a broken observer: a log line
        gw.event_observers.append(observe)
        await gw.start()
        await settle()
        try:
            assert [(w, e.state) for w, e, _ in heard if isinstance(e, WorkerStatus)] == [
                ("a", WorkerState.LOADING), ("a", WorkerState.IDLE), ("b", WorkerState.LOADING), ("b", WorkerState.IDLE)]
            assert await gw.wait_ready(1)
            stream = gw.chat([user("hi")])
            await settle()
            host = a if stream.request_id in a.active else b
            host.finish(stream.request_id, "hello")
            assert terminal(await collect(stream)).text == "hello"  # the broken observer cost nothing
            mine = [(type(e), done) for w, e, done in heard if getattr(e, "request_id", None) == stream.request_id]
            assert mine == [(PrefillDone, 0), (ChunkEvent, 0), (Done, 0)]
            assert all(w == host.worker_id for w, e, _ in heard if getattr(e, "request_id", None) == stream.request_id)
            assert any("event observer failed" in r.getMessage() for r in caplog.records)
            await gw.remove_host("b")
            before = len(heard)
            b.sink("b", WorkerStatus("b", WorkerState.IDLE, capacity=1, num_slots=2))  # type: ignore[misc]
            await settle()
            assert len(heard) == before  # a host that left is not heard
        finally:
            await gw.close()

    with caplog.at_level(logging.ERROR):
        run(main())


def test_the_monitor_keeps_statuses_slots_and_counters_from_the_gateway_events() -> None:
    async def main() -> None:
        a = FakeHost("a")
        gw = Gateway([a])
        monitor = EngineMonitor()
        monitor.watch(gw)
        await gw.start()
        await settle()
        try:
            assert monitor.status("a") is not None and monitor.status("a").state is WorkerState.IDLE
            stream = gw.chat([user("hi")])
            await settle()
            a.finish(stream.request_id, "hello")
            await collect(stream)
            failing = gw.chat([user("again")])
            await settle()
            a.fail(failing.request_id)
            assert isinstance(terminal(await collect(failing)), ErrorEvent)
            counters = monitor.counters()
            assert counters["requests"] == 1 and counters["errors"] == 1
            snap = monitor.snapshot(gw)
            assert [w.id for w in snap.workers] == ["a"] and snap.requests.completed == 1
            assert any(s.messages == 2 for s in snap.slots)  # the chat and its reply, from the Done's snapshot
            monitor.forget("a")
            assert monitor.status("a") is None
        finally:
            await gw.close()

    run(main())
