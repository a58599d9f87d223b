"""Issue 19, item 4 (the model load): a load that makes no progress — no stage reported and no CPU
spent by the loading thread, as when a model's network drive stops answering — is reported like a
hung worker (ERROR, "worker_hung", with a sentence that says what to do); chats queued for it get
that error instead of waiting forever, and closing the host does not wait for the stuck load."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from desktop.gateway.gateway import Gateway
from desktop.errors import ModelLoadError
from desktop.model.loader import ModelSpec
from desktop.protocol import ErrorEvent, WorkerState
from desktop.workers import runtime
from desktop.workers.config import WorkerConfig
from desktop.workers.heartbeat import Liveness
from desktop.workers.load_watch import LoadWatch, thread_cpu
from desktop.workers.thread_host import ThreadHost

pytestmark = [pytest.mark.hardening, pytest.mark.timeout(120)]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_load_without_stages_or_cpu_is_stuck_once_and_either_keeps_it_alive():
    clock, cpu, fired = Clock(), [0.0], []
    watch = LoadWatch(fired.append, 10.0, clock=clock, cpu=lambda: cpu[0])
    watch._last = 0.0  # as start() sets it, without its thread
    assert not watch.check()  # the first check takes the CPU reading
    for _ in range(10):  # 30 s reading weights: CPU moves, no stage
        clock.now += 3.0
        cpu[0] += 0.05
        assert not watch.check()
    for _ in range(3):  # a long stage without CPU (waiting for a slow disk) that reports stages
        clock.now += 8.0
        watch.progress()
        assert not watch.check()
    clock.now += 10.5  # then nothing at all
    assert watch.check() and fired == [pytest.approx(10.5)]
    clock.now += 30.0
    assert not watch.check() and len(fired) == 1


def test_thread_cpu_moves_for_a_busy_thread_and_stands_for_a_blocked_one():
    readers, gate = {}, threading.Event()

    def blocked():
        readers["blocked"] = thread_cpu()
        gate.wait()

    t = threading.Thread(target=blocked, daemon=True)
    t.start()
    while "blocked" not in readers:
        time.sleep(0.01)
    time.sleep(0.05)
    before, mine = readers["blocked"](), thread_cpu()
    start = mine()
    while mine() - start < 0.05:  # this thread spins
        pass
    time.sleep(0.2)
    assert readers["blocked"]() == before
    gate.set()


def test_a_load_that_hangs_is_reported_like_a_hung_worker_and_queued_chats_fail(monkeypatch):
    release = threading.Event()

    def hung_load(spec, progress=None, **kw):  # a model on a network folder that stopped answering
        release.wait()
        raise ModelLoadError("released by the test")

    monkeypatch.setattr(runtime, "load_model", hung_load)
    host = Reporting("cpu0", ModelSpec("tiny"), WorkerConfig(num_slots=1), threads=1,
                     liveness=Liveness(load_hang_s=1.0))

    async def main():
        gw = Gateway([host])
        await gw.start()
        try:
            stream = gw.chat([{"role": "user", "content": "hello?"}], {"max_tokens": 4})
            events = [e async for e in stream]
            return events
        finally:
            started = time.monotonic()
            await gw.close()
            return_s = time.monotonic() - started
            assert return_s < 3.0, f"closing waited {return_s:.1f} s on the stuck load"

    async def bounded():
        return await asyncio.wait_for(main(), 30)

    try:
        events = asyncio.run(bounded())
    finally:
        release.set()
    end = events[-1]
    assert isinstance(end, ErrorEvent), events
    assert "made no progress while loading" in end.message and "Settings" in end.message
    state, code, restarting = host.reported[-1][:3]
    assert (state, code, restarting) == (WorkerState.ERROR, "worker_hung", False), host.reported


class Reporting(ThreadHost):
    """A thread host that remembers what it reported."""

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.reported: list[tuple] = []

    def _report(self, state, message="", code="", restarting=False) -> None:
        self.reported.append((state, code, restarting, message))
        super()._report(state, message, code, restarting)


def test_a_subprocess_whose_load_hangs_reports_it_and_ends_without_restarting(monkeypatch):
    from desktop.workers import process_host
    from desktop.workers.process_host import ProcessHost
    from stuck_load import stuck_child_main

    monkeypatch.setattr(process_host, "child_main", stuck_child_main)
    host = ProcessHost("cpu0", ModelSpec("tiny"), WorkerConfig(num_slots=1), threads=1, backoff=(0.2, 0.2),
                       liveness=Liveness(load_hang_s=3.0))
    seen: list = []
    host.start(lambda worker_id, event: seen.append(event))
    try:
        deadline = time.monotonic() + 100  # the child imports torch first: slow on a busy machine
        while not any(getattr(e, "code", "") == "worker_hung" for e in seen) and time.monotonic() < deadline:
            time.sleep(0.1)
        hung = [e for e in seen if getattr(e, "code", "") == "worker_hung"]
        assert hung and hung[0].state is WorkerState.ERROR and not hung[0].restarting
        assert "made no progress while loading" in hung[0].message
        host.process.join(15)
        assert not host.process.is_alive()  # it ended itself: nothing is left hanging
        time.sleep(1.0)
        assert host.restarts == 0  # a load that hung would hang again: not restarted in a loop
    finally:
        started = time.monotonic()
        host.close()
        assert time.monotonic() - started < 5
