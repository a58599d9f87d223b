"""Issue 8, item 2 inside the worker: an exception while serving one request ends that request with
an error event (not retryable: it is the request's fault), a concurrent request still completes
and the worker goes on serving, on the calling thread, a thread host and a subprocess host. A bug
in the loop itself makes the host report ERROR, fail what ran there, and bring the worker back."""

from __future__ import annotations

import asyncio

import pytest
from worker_helpers import make_client, run_all

from desktop.gateway.gateway import Gateway
from desktop.protocol import AppendInput, Chat, CreateSession, Done, ErrorEvent, Generate
from desktop.model.loader import ModelSpec
from desktop.model.messages import Message
from desktop.model.params import SamplingParams
from desktop.model.sampling import Sampler
from desktop.workers import worker as worker_module
from desktop.workers.config import WorkerConfig
from desktop.workers.heartbeat import Liveness
from desktop.workers.process_host import ProcessHost
from desktop.workers.thread_host import ThreadHost

pytestmark = pytest.mark.hardening

TINY = ModelSpec("tiny")
FAST = Liveness(beat_s=0.1, hang_after_s=3.0)


def forced(params: SamplingParams, **fields) -> SamplingParams:
    """Params carrying values validation would refuse, as a bug or a foreign client could send them."""
    for name, value in fields.items():
        object.__setattr__(params, name, value)
    return params


def bad_message(text: str) -> Message:
    m = Message("user", "placeholder")
    object.__setattr__(m, "content", text)
    return m


def ends(events: list) -> object:
    return events[-1]


def test_a_failing_request_ends_alone_on_the_worker(tiny_lm):
    client = make_client(tiny_lm)
    good = SamplingParams(max_tokens=6, ignore_eos=True)
    cmds = [Chat("bad-seed", (Message("user", "one"),), forced(SamplingParams(max_tokens=6), seed=2**70)),
            Chat("good", (Message("user", "two"),), good),
            Chat("bad-stop", (Message("user", "three"),), forced(SamplingParams(max_tokens=6), stop=(123,))),
            Chat("bad-topk", (Message("user", "four"),), forced(SamplingParams(max_tokens=6, temperature=1.0), top_k=1.5))]
    out = run_all(client, cmds)
    for rid in ("bad-seed", "bad-stop", "bad-topk"):
        err = ends(out[rid])
        assert isinstance(err, ErrorEvent) and not err.retryable and err.code == "internal", err
    assert isinstance(ends(out["good"]), Done) and ends(out["good"]).stats.generated_tokens == 6
    later = run_all(client, [Chat("later", (Message("user", "five"),), good)])["later"]
    assert isinstance(ends(later), Done)


def test_a_lone_surrogate_in_a_session_ends_that_request_only(tiny_lm):
    client = make_client(tiny_lm)
    client.run(CreateSession("c", "s", "Be brief."))
    err = client.run(AppendInput("a", "s", (bad_message("x\udfff"),)))[-1]
    assert isinstance(err, ErrorEvent) and not err.retryable and "U+DFFF" in err.message
    assert isinstance(client.run(AppendInput("b", "s", (Message("user", "fine"),)))[-1], Done)
    assert isinstance(client.run(Generate("g", "s", SamplingParams(max_tokens=3)))[-1], Done)


def test_a_sampler_that_raises_mid_batch_ends_only_its_request(tiny_lm, monkeypatch):
    real = Sampler.__call__
    calls: dict[int, int] = {}

    def flaky(self, logits, history):
        calls[id(self)] = calls.get(id(self), 0) + 1
        if self.params.seed == 666 and calls[id(self)] >= 3:  # from the third token on, inside a batched decode
            raise RuntimeError("sampler exploded")
        return real(self, logits, history)

    monkeypatch.setattr(Sampler, "__call__", flaky)
    client = make_client(tiny_lm)
    sampled = dict(max_tokens=8, temperature=0.7, ignore_eos=True)
    out = run_all(client, [Chat("bad", (Message("user", "one"),), SamplingParams(seed=666, **sampled)),
                           Chat("good", (Message("user", "two"),), SamplingParams(seed=1, **sampled))])
    assert isinstance(ends(out["bad"]), ErrorEvent) and "sampler exploded" in ends(out["bad"]).message
    assert isinstance(ends(out["good"]), Done) and ends(out["good"]).stats.generated_tokens == 8
    assert client.worker.counters.errors == 1 and not client.worker.scheduler.running


async def collect(stream) -> list:
    return [event async for event in stream]


async def one_bad_one_good(gw: Gateway) -> None:
    bad = gw.chat([Message("user", "bad")], forced(SamplingParams(max_tokens=5), seed=2**70))
    good = gw.chat([Message("user", "good")], SamplingParams(max_tokens=20, ignore_eos=True))
    bad_events, good_events = await asyncio.wait_for(asyncio.gather(collect(bad), collect(good)), 60)
    assert isinstance(bad_events[-1], ErrorEvent) and not bad_events[-1].retryable, bad_events[-1]
    assert isinstance(good_events[-1], Done) and good_events[-1].stats.generated_tokens == 20
    later = await asyncio.wait_for(collect(gw.chat([Message("user", "later")], SamplingParams(max_tokens=3))), 30)
    assert isinstance(later[-1], Done)
    assert all(w.state == "idle" for w in gw.stats().workers)


def test_thread_host_contains_a_failing_request():
    async def main() -> None:
        gw = Gateway([ThreadHost("t", TINY, WorkerConfig(num_slots=2), threads=1, liveness=FAST)])
        await gw.start()
        assert await gw.wait_ready(60)
        await one_bad_one_good(gw)
        await gw.close()

    asyncio.run(main())


def test_process_host_contains_a_failing_request():
    async def main() -> None:
        host = ProcessHost("p", TINY, WorkerConfig(num_slots=2), threads=1, backoff=(0.1, 1.0), liveness=FAST)
        gw = Gateway([host])
        await gw.start()
        assert await gw.wait_ready(120)
        await one_bad_one_good(gw)
        assert host.restarts == 0
        await gw.close()

    asyncio.run(main())


def test_a_bug_in_the_loop_fails_its_requests_and_the_thread_worker_comes_back(monkeypatch):
    real = worker_module.Worker._decode_tick
    broken = {"left": 1}

    def buggy(self):
        if self.scheduler.running and broken["left"]:
            broken["left"] -= 1
            raise KeyError("scheduler bug")
        return real(self)

    monkeypatch.setattr(worker_module.Worker, "_decode_tick", buggy)

    async def main() -> None:
        host = ThreadHost("t", TINY, WorkerConfig(num_slots=2), threads=1, liveness=FAST, backoff=(0.05, 1.0))
        gw = Gateway([host])
        await gw.start()
        assert await gw.wait_ready(60)
        events = await asyncio.wait_for(collect(gw.chat([Message("user", "hi")], SamplingParams(max_tokens=5))), 30)
        assert isinstance(events[-1], ErrorEvent) and events[-1].code == "worker_crashed", events[-1]
        assert "scheduler bug" in events[-1].message  # the worker was reported down (ERROR) at once
        for _ in range(100):
            if gw.stats().workers[0].state == "idle":
                break
            await asyncio.sleep(0.05)
        assert host.restarts == 1
        again = await asyncio.wait_for(collect(gw.chat([Message("user", "again")], SamplingParams(max_tokens=3))), 30)
        assert isinstance(again[-1], Done)
        await gw.close()

    asyncio.run(main())
