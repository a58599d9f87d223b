"""Workers joining and leaving a running gateway (a remote server added or removed in Settings):
a host added later starts, comes up and is routed to; a removed host's running and pinned requests
end at once with "worker_removed", its sessions are over, waiting chats go to the others, its late
events are not heard; the last worker gone fails what waits as when none is up. Over the tiny
model's thread host, a conversation's next turn still hits its cache across both changes."""

from __future__ import annotations

import asyncio

import pytest

from desktop.gateway.gateway import Gateway
from desktop.errors import UnknownSession, WorkerCrashed
from desktop.model.loader import ModelSpec
from desktop.model.params import SamplingParams
from desktop.protocol import Done, ErrorEvent, PrefillDone, WorkerState
from desktop.workers.config import WorkerConfig
from desktop.workers.thread_host import ThreadHost
from fake_host import FakeHost
from gw_helpers import bot, collect, gateway, run, settle, terminal, user


def workers(gw: Gateway) -> dict[str, str]:
    return {w.id: w.state for w in gw.stats().workers}


def test_a_host_added_to_a_running_gateway_loads_then_serves() -> None:
    async def main() -> None:
        a, b = FakeHost("a"), FakeHost("b", ready=False)
        async with gateway(a) as gw:
            first = gw.chat([user("one")])
            await settle()
            assert first.request_id in a.active  # a is full now
            waiting = gw.chat([user("two")])
            await settle()
            gw.add_host(b)
            await settle()
            assert workers(gw) == {"a": "idle", "b": "loading"} and b.sink is not None  # started, not up yet
            assert not b.commands and gw.stats().queue.length == 1
            with pytest.raises(ValueError, match="already in the pool"):
                gw.add_host(FakeHost("b"))
            b.recover()  # LOADING → IDLE, as at boot
            await settle()
            assert waiting.request_id in b.active and workers(gw)["b"] == "idle"
            b.finish(waiting.request_id, "from b")
            assert terminal(await collect(waiting)).text == "from b"
            a.finish(first.request_id)
            assert isinstance(terminal(await collect(first)), Done)
    run(main())


def test_removing_a_host_ends_what_runs_there_and_the_queue_goes_to_the_others() -> None:
    async def main() -> None:
        a, b = FakeHost("a"), FakeHost("b")
        async with gateway(a, b) as gw:
            on = {}
            for text in ("one", "two"):
                stream = gw.chat([user(text)])
                await settle()
                on[text] = (stream, next(h for h in (a, b) if stream.request_id in h.active))
            waiting = gw.chat([user("three")])  # both are full: it waits
            await settle()
            (gone_stream, gone), (kept_stream, kept) = on["one"], on["two"]
            await gw.remove_host(gone.worker_id)
            err = terminal(await collect(gone_stream))
            assert isinstance(err, ErrorEvent) and err.code == "worker_removed" and err.retryable
            assert f"Worker {gone.worker_id} was removed" in err.message
            assert gone.closed and list(workers(gw)) == [kept.worker_id]
            assert gw.stats().queue.length == 1 and not kept.violations  # still waiting, for the other one
            kept.finish(kept_stream.request_id, "kept")
            assert terminal(await collect(kept_stream)).text == "kept"  # the other worker's request is unaffected
            await settle()
            assert waiting.request_id in kept.active
            kept.finish(waiting.request_id, "served")
            assert terminal(await collect(waiting)).text == "served"
            requests = gw.stats().requests
            assert (requests.completed, requests.failed, requests.dropped_events) == (2, 1, 0)
            assert not any(c.request_id == waiting.request_id for c in gone.commands)
    run(main())


def test_removing_a_host_ends_its_sessions_and_the_commands_waiting_for_them() -> None:
    async def main() -> None:
        a, b = FakeHost("a"), FakeHost("b")
        async with gateway(a, b) as gw:
            create = asyncio.ensure_future(gw.create_session("Be brief."))
            await settle()
            host = next(h for h in (a, b) if h.active)
            host.finish(next(iter(host.active)))
            sid = await create
            running = gw.append_input(sid, [user("hi")])
            pinned = gw.generate_stream(sid)  # waits for the session's previous command
            await settle()
            assert running.request_id in host.active and gw.stats().queue.entries[0].pin == host.worker_id
            await gw.remove_host(host.worker_id)
            for stream in (running, pinned):
                err = terminal(await collect(stream))
                assert isinstance(err, ErrorEvent) and err.code == "worker_removed", err
                assert "start a new session" in err.message and not err.retryable
            with pytest.raises(UnknownSession) as later:
                gw.append_input(sid, [user("again")])
            assert later.value.code == "worker_removed" and host.worker_id in later.value.message
            await gw.end_session(sid)  # over already: nothing to do, no error
            assert gw.stats().sessions == 0 and gw.stats().queue.length == 0
    run(main())


def test_the_last_worker_removed_fails_what_waits_and_a_removed_host_is_not_heard() -> None:
    async def main() -> None:
        old = FakeHost("a")
        async with gateway(old) as gw:
            running, waiting = gw.chat([user("one")]), gw.chat([user("two")])
            await settle()
            await gw.remove_host("a")
            assert terminal(await collect(running)).code == "worker_removed"
            err = terminal(await collect(waiting))  # nothing would ever serve it: said at once
            assert isinstance(err, ErrorEvent) and err.code == WorkerCrashed.code and "No worker is left" in err.message
            with pytest.raises(WorkerCrashed, match="No worker is left"):
                gw.chat([user("three")])
            with pytest.raises(ValueError, match="no worker 'a'"):
                await gw.remove_host("a")
            new = FakeHost("a")  # the same id again, a new host
            gw.add_host(new)
            await settle()
            old._status(WorkerState.ERROR, "late news from the old host")  # ignored: not in the pool
            await settle()
            assert workers(gw) == {"a": "idle"}
            stream = gw.chat([user("four")])
            await settle()
            new.finish(stream.request_id, "new")
            assert terminal(await collect(stream)).text == "new"
    run(main())


def test_a_local_conversation_keeps_its_cache_across_a_remote_added_and_removed() -> None:
    """The point of adding a server live: the local worker is not touched, its KV stays."""
    async def main() -> None:
        local = ThreadHost("cpu0", ModelSpec("tiny"), WorkerConfig(num_slots=2, cache_min_tokens=4), threads=1)
        gw = Gateway([local])
        await gw.start()
        try:
            assert await gw.wait_ready(60)
            params = SamplingParams(max_tokens=4)
            msgs = [user("Hello there, how are you?")]

            async def turn(n: int) -> PrefillDone:
                events = await collect(gw.chat(msgs, params))
                end = terminal(events)
                assert isinstance(end, Done), end
                msgs.extend([bot(end.text), user(f"And then {n}?")])
                return next(e for e in events if isinstance(e, PrefillDone))

            assert (await turn(1)).cached_tokens == 0
            remote = FakeHost("remote0", num_slots=4, capacity=2)
            gw.add_host(remote)
            await settle()
            assert workers(gw) == {"cpu0": "idle", "remote0": "idle"}
            second = await turn(2)
            assert second.kind == "extend" and second.cached_tokens > 0 and not remote.commands
            await gw.remove_host("remote0")
            third = await turn(3)
            assert third.kind == "extend" and third.cached_tokens > second.cached_tokens
            assert gw.stats().routing["hit"] == 2 and list(workers(gw)) == ["cpu0"]
        finally:
            await gw.close()
    run(main(), timeout=90)
