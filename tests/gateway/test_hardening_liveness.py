"""Issue 8, item 3: liveness. A stopped (SIGSTOP) subprocess worker is declared hung within its
deadline, its request fails with a clear error, it is killed and restarted; cancel() ends a
stream within 1 s whatever the worker does; a stuck thread worker gets no work until its
heartbeats resume; when every worker failed to load, requests fail at once with the load error."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time

import pytest

from desktop.gateway.gateway import Gateway
from desktop.protocol import ChunkEvent, Done, ErrorEvent, Queued
from desktop.errors import ModelLoadError, OmnideskError
from desktop.model.loader import ModelSpec
from desktop.model.messages import Message
from desktop.model.params import SamplingParams
from desktop.workers import worker as worker_module
from desktop.workers.config import WorkerConfig
from desktop.workers.heartbeat import Liveness
from desktop.workers.process_host import ProcessHost
from desktop.workers.thread_host import ThreadHost

pytestmark = pytest.mark.hardening

TINY = ModelSpec("tiny")
FAST = Liveness(beat_s=0.1, hang_after_s=1.5)
LONG = SamplingParams(max_tokens=2000, ignore_eos=True)


async def collect(stream) -> list:
    return [event async for event in stream]


async def until_idle(gw: Gateway, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while gw.stats().workers[0].state != "idle":
        assert time.monotonic() < deadline, gw.stats().workers
        await asyncio.sleep(0.05)


async def first_chunk(stream) -> None:
    async for event in stream:
        if isinstance(event, ChunkEvent):
            return
    raise AssertionError("the stream ended before its first chunk")


def test_a_stopped_subprocess_worker_is_declared_hung_killed_and_restarted():
    async def main() -> None:
        host = ProcessHost("p", TINY, WorkerConfig(num_slots=2), threads=1, backoff=(0.1, 1.0), liveness=FAST)
        gw = Gateway([host], cancel_grace_s=0.3)
        await gw.start()
        assert await gw.wait_ready(120)
        first = gw.chat([Message("user", "Tell me a long story")], LONG)
        second = gw.chat([Message("user", "And another one")], LONG)
        await first_chunk(first)
        os.kill(host.process.pid, signal.SIGSTOP)
        try:
            stopped_at = time.monotonic()
            await gw.cancel(first.request_id)  # the worker cannot answer: the gateway ends it
            rest = await asyncio.wait_for(collect(first), 1.0)
            assert isinstance(rest[-1], Done) and rest[-1].stats.finish_reason == "cancelled"
            assert time.monotonic() - stopped_at < 1.0
            events = await asyncio.wait_for(collect(second), 10)
            waited = time.monotonic() - stopped_at
            err = events[-1]
            assert isinstance(err, ErrorEvent) and err.code == "worker_crashed" and "responding" in err.message, err
            assert 1.0 < waited < 1.5 + 2.0, waited
        finally:
            try:
                os.kill(host.process.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        await until_idle(gw, 120)
        assert host.restarts == 1
        again = await asyncio.wait_for(collect(gw.chat([Message("user", "Are you back?")], SamplingParams(max_tokens=4))), 30)
        assert isinstance(again[-1], Done) and again[-1].stats.generated_tokens == 4
        assert gw.stats().requests.cancelled == 1
        await gw.close()

    asyncio.run(main())


def test_a_stuck_thread_worker_gets_no_work_and_comes_back_when_it_resumes(monkeypatch):
    gate = threading.Event()
    gate.set()
    real = worker_module.Worker._decode_tick

    def stuck(self):
        gate.wait()  # a forward that never returns, until the test lets it
        return real(self)

    monkeypatch.setattr(worker_module.Worker, "_decode_tick", stuck)

    async def main() -> None:
        gw = Gateway([ThreadHost("t", TINY, WorkerConfig(num_slots=2), threads=1, liveness=FAST)], cancel_grace_s=0.3)
        await gw.start()
        assert await gw.wait_ready(60)
        a = gw.chat([Message("user", "first")], LONG)
        b = gw.chat([Message("user", "second")], LONG)
        await first_chunk(a)
        gate.clear()
        t0 = time.monotonic()
        await gw.cancel(a.request_id)
        rest = await asyncio.wait_for(collect(a), 1.0)
        assert isinstance(rest[-1], Done) and time.monotonic() - t0 < 1.0
        err = (await asyncio.wait_for(collect(b), 10))[-1]
        assert isinstance(err, ErrorEvent) and "responding" in err.message and time.monotonic() - t0 < 1.5 + 2.0
        with pytest.raises(OmnideskError, match="responding"):  # no worker can serve: fail at once
            gw.chat([Message("user", "third")])
        gate.set()  # the forward returns: heartbeats resume and the worker comes back, empty
        await until_idle(gw, 10)
        again = await asyncio.wait_for(collect(gw.chat([Message("user", "again")], SamplingParams(max_tokens=3))), 30)
        assert isinstance(again[-1], Done)
        await gw.close()

    asyncio.run(main())


def test_when_every_worker_failed_to_load_requests_fail_at_once(tmp_path):
    missing = ModelSpec(str(tmp_path / "no-such-model"))

    async def main() -> None:
        gw = Gateway([ThreadHost("a", missing), ThreadHost("b", missing)])
        await gw.start()
        early = gw.chat([Message("user", "queued while loading")])
        assert not await gw.wait_ready(30)
        events = await asyncio.wait_for(collect(early), 1.0)
        assert [type(e) for e in events] == [Queued, ErrorEvent] and events[-1].code == "model_load"
        assert "no-such-model" in events[-1].message
        with pytest.raises(ModelLoadError, match="no-such-model"):
            gw.chat([Message("user", "hello")])
        with pytest.raises(ModelLoadError, match="no-such-model"):
            await asyncio.wait_for(gw.create_session("Be brief."), 1.0)
        await gw.close()

    asyncio.run(main())
