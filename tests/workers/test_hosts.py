"""Real hosts behind the gateway on the tiny model: a thread host serves and routes turns; a
subprocess worker killed with SIGKILL mid-stream fails its request at once and comes back."""

from __future__ import annotations

import asyncio
import os
import signal
import time

from desktop.gateway.gateway import Gateway
from desktop.protocol import ChunkEvent, Done, ErrorEvent
from desktop.model.loader import ModelSpec
from desktop.model.messages import Message
from desktop.model.params import SamplingParams
from desktop.workers.config import WorkerConfig
from desktop.workers.factory import make_hosts
from desktop.workers.process_host import ProcessHost
from desktop.workers.thread_host import ThreadHost

TINY = ModelSpec("tiny")


async def collect(stream) -> list:
    return [event async for event in stream]


async def until_up(gw: Gateway, timeout: float) -> bool:
    """wait_ready settles on ERROR too; a restarting worker needs polling until it is up again."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await gw.wait_ready(timeout):
            return True
        await asyncio.sleep(0.1)
    return False


def test_thread_hosts_route_the_second_turn_to_the_first_worker():
    async def main() -> None:
        gw = Gateway([ThreadHost("a", TINY, WorkerConfig(num_slots=2), threads=1), ThreadHost("b", TINY, WorkerConfig(num_slots=2), threads=1)])
        await gw.start()
        assert await gw.wait_ready(60)
        msgs = [Message("user", "Hello there, how are you?")]
        first = (await collect(gw.chat(msgs, SamplingParams(max_tokens=6))))[-1]
        assert isinstance(first, Done)
        msgs += [Message("assistant", first.text), Message("user", "And now?")]
        second = (await collect(gw.chat(msgs, SamplingParams(max_tokens=6))))[-1]
        assert isinstance(second, Done) and second.stats.kind == "extend" and second.stats.cached_tokens > 0
        await gw.close()

    asyncio.run(main())


def test_sigkilled_subprocess_worker_fails_its_request_and_comes_back():
    async def main() -> None:
        host = ProcessHost("p", TINY, WorkerConfig(num_slots=2), threads=1, backoff=(0.1, 1.0))
        gw = Gateway([host])
        await gw.start()
        assert await gw.wait_ready(120)
        stream = gw.chat([Message("user", "Tell me a long story")], SamplingParams(max_tokens=1000, ignore_eos=True))
        killed_at = None
        async for event in stream:
            if isinstance(event, ChunkEvent) and killed_at is None:
                os.kill(host.process.pid, signal.SIGKILL)
                killed_at = time.monotonic()
            last = event
        assert isinstance(last, ErrorEvent) and last.code == "worker_crashed" and last.retryable
        assert time.monotonic() - killed_at < 1.0
        assert await until_up(gw, 120)
        assert host.restarts == 1
        again = (await collect(gw.chat([Message("user", "Are you back?")], SamplingParams(max_tokens=4))))[-1]
        assert isinstance(again, Done) and again.stats.generated_tokens == 4
        await gw.close()

    asyncio.run(main())


def test_factory_picks_hosts_by_device():
    cfg = WorkerConfig()
    assert [type(h) for h in make_hosts(TINY, cfg)] == [ThreadHost]
    hosts = make_hosts(TINY, cfg, cpu_workers=2, cores=4)
    assert [type(h) for h in hosts] == [ProcessHost, ProcessHost] and hosts[0].threads == 2
    gpu = make_hosts(ModelSpec("tiny", device="cuda:1"), cfg)[0].host  # inside its CPU fall-back
    assert gpu.env == {"CUDA_VISIBLE_DEVICES": "1"} and gpu.spec.device == "cuda:0"
