"""Warms at the gateway (a chat with max_tokens 0: the draft being typed): they hold no capacity
and wait in no queue, a newer one of the same conversation stops the older, one that would evict
is skipped; over the real thread host a Send after a warm reads only what changed."""

from __future__ import annotations

from desktop.gateway.gateway import Gateway
from desktop.model.loader import ModelSpec
from desktop.model.params import SamplingParams
from desktop.protocol import Done, Queued, Stop
from desktop.workers.config import WorkerConfig
from desktop.workers.thread_host import ThreadHost
from fake_host import FakeHost
from gw_helpers import bot, collect, gateway, run, settle, terminal, user

WARM = {"max_tokens": 0}


def test_a_warm_holds_no_capacity_and_a_newer_one_stops_it() -> None:
    async def main() -> None:
        host = FakeHost("w0", capacity=2, num_slots=2)
        async with gateway(host) as gw:
            conv = [user("Hi"), bot("Hello!")]
            first = gw.chat(conv + [user("What a")], WARM)
            await settle()
            assert gw.stats().requests.running == 0 and not gw.stats().queue.length  # no capacity held
            second = gw.chat(conv + [user("What a day")], WARM)
            await settle()
            assert [type(c).__name__ for c in host.commands] == ["Chat", "Stop", "Chat"]
            assert host.commands[1] == Stop(first.request_id)
            assert terminal(await collect(first)).stats.finish_reason == "cancelled"
            real = gw.chat(conv + [user("What a day it was")], {"max_tokens": 4})
            await settle()
            assert host.commands[-1].request_id == real.request_id  # sent at once, beside the warm
            host.finish(real.request_id)
            host.finish(second.request_id, "", finish_reason="prefilled")
            events = await collect(real)
            assert not any(isinstance(e, Queued) for e in events) and isinstance(terminal(events), Done)
            assert isinstance(terminal(await collect(second)), Done)
            counts = gw.stats().requests
            assert (counts.completed, counts.cancelled) == (1, 0)  # warms are no user requests
            assert not host.violations
    run(main())


def test_a_warm_that_would_evict_is_skipped() -> None:
    async def main() -> None:
        host = FakeHost("w0", capacity=2, num_slots=1, auto=0.0)
        async with gateway(host) as gw:
            assert isinstance(terminal(await collect(gw.chat([user("Other")], {"max_tokens": 2}))), Done)
            sent = len(host.commands)
            skipped = terminal(await collect(gw.chat([user("Hi"), bot("Hello!"), user("So")], WARM)))
            assert skipped.stats.finish_reason == "cancelled" and len(host.commands) == sent
    run(main())


def test_send_after_warms_over_the_thread_host() -> None:
    async def main() -> None:
        config = WorkerConfig(num_slots=2, max_running=1, cache_min_tokens=4, prefill_chunk=16)
        gw = Gateway([ThreadHost("t0", ModelSpec("tiny"), config, threads=1)])
        await gw.start()
        try:
            assert await gw.wait_ready(timeout=60)
            conv = [user("Tell me about the sea.")]
            conv.append(bot(terminal(await collect(gw.chat(conv, SamplingParams(max_tokens=6)))).text))
            for draft in ("What about", "What about rivers and"):
                warm = terminal(await collect(gw.chat(conv + [user(draft)], WARM)))
                assert warm.stats.finish_reason == "prefilled", warm.stats
            # a real request of another conversation is never queued behind a warm (capacity 1)
            long_warm = gw.chat(conv + [user("What about rivers and lakes " * 5)], WARM)
            other = await collect(gw.chat([user("Hello")], SamplingParams(max_tokens=3)))
            assert not any(isinstance(e, Queued) for e in other) and isinstance(terminal(other), Done)
            assert isinstance(terminal(await collect(long_warm)), Done)
            done = terminal(await collect(gw.chat(conv + [user("What about rivers and lakes?")], SamplingParams(max_tokens=4))))
            assert done.stats.cached_tokens > done.stats.history_tokens, done.stats  # the draft was cached
        finally:
            await gw.close()
    run(main(), timeout=120)
