"""Stateful sessions and worker failures through the gateway: pinning, per-session order, end of
a session, a crash that fails what ran there and ends its sessions, and a worker coming back."""

from __future__ import annotations

import asyncio

import pytest

from desktop.protocol import (
    AppendInput, ChunkEvent, CreateSession, Done, EndSession, ErrorEvent, Generate, PrefillDone, QueueDone, Queued, Stop,
    TruncateReply,
)
from desktop.errors import OmnideskError, UnknownSession, WorkerCrashed
from fake_host import FakeHost
from gw_helpers import collect, gateway, run, settle, take, terminal, user


async def open_session(gw, host: FakeHost, system: str | None = "Be brief.") -> str:
    task = asyncio.create_task(gw.create_session(system))
    await settle()
    rid = next(c.request_id for c in reversed(host.commands) if isinstance(c, CreateSession))
    host.finish(rid)
    return await task


def test_a_session_runs_on_its_worker_in_order() -> None:
    async def main() -> None:
        w1, w2 = FakeHost("w1", capacity=2), FakeHost("w2")
        async with gateway(w1, w2) as gw:
            sid = await open_session(gw, w1)
            assert gw.stats().workers[0].sessions == 1
            gen = gw.generate_stream(sid)
            app = gw.append_input(sid, [user("more")])  # waits for the generation, even with capacity left
            chat = gw.chat([user("other")])  # not held up by the waiting session command
            await settle()
            assert gen.request_id in w1.active and app.request_id not in w1.active
            assert chat.request_id in w1.active or chat.request_id in w2.active
            assert [type(e) for e in await take(app)] == [Queued]
            w1.finish(gen.request_id, "reply")
            assert [e.text_delta for e in await collect(gen) if isinstance(e, ChunkEvent)] == ["reply"]
            assert [type(e) for e in await take(app)] == [QueueDone]
            await settle()
            w1.finish(app.request_id)
            assert isinstance(terminal(await collect(app)), Done)
            kinds = [type(c) for c in w1.commands if not isinstance(c, Stop)]
            assert kinds[:3] == [CreateSession, Generate, AppendInput]
            assert not w1.violations and gw.stats().routing["session"] == 2
    run(main())


def test_session_commands_wait_for_their_worker_even_when_another_is_free() -> None:
    async def main() -> None:
        w1, w2 = FakeHost("w1"), FakeHost("w2")
        async with gateway(w1, w2) as gw:
            sid = await open_session(gw, w1)
            busy = gw.chat([user("x")])
            await settle()
            if busy.request_id in w2.active:  # make sure w1 is the busy one
                w2.finish(busy.request_id)
                busy = gw.chat([user("y")])
                await settle()
            assert busy.request_id in w1.active
            gen = gw.generate_stream(sid)
            await settle()
            assert [type(e) for e in await take(gen)] == [Queued] and not w2.active
            w1.finish(busy.request_id)
            await settle()
            assert gen.request_id in w1.active
    run(main())


def test_a_session_used_after_end_session_is_refused_clearly() -> None:
    async def main() -> None:
        host = FakeHost("w1", num_slots=1)
        async with gateway(host) as gw:
            sid = await open_session(gw, host)
            end = asyncio.create_task(gw.end_session(sid))
            await end
            assert any(isinstance(c, EndSession) and c.session_id == sid for c in host.commands)
            for use in (lambda: gw.append_input(sid, [user("hi")]), lambda: gw.generate_stream(sid)):
                with pytest.raises(UnknownSession, match="has ended") as err:
                    use()
                assert err.value.code == "unknown_session"
            await gw.end_session(sid)  # ending it again does nothing
            with pytest.raises(UnknownSession, match="no session"):
                gw.generate_stream("s-never")
            # the one slot is usable by chats again
            s = gw.chat([user("chat")])
            await settle()
            assert s.request_id in host.active and not host.violations
    run(main())


def test_end_session_cancels_what_waits_and_stops_what_runs() -> None:
    async def main() -> None:
        host = FakeHost("w1", capacity=2)
        async with gateway(host) as gw:
            sid = await open_session(gw, host)
            gen = gw.generate_stream(sid)
            app = gw.append_input(sid, [user("later")])
            await settle()
            await gw.end_session(sid)
            assert Stop(gen.request_id) in host.commands
            for s in (gen, app):
                end = terminal(await collect(s))
                assert isinstance(end, Done) and end.stats.finish_reason == "cancelled"
            assert not any(isinstance(c, AppendInput) for c in host.commands)
    run(main())


def test_sessions_are_not_evicted_by_chats() -> None:
    async def main() -> None:
        host = FakeHost("w1", num_slots=2)
        async with gateway(host) as gw:
            first = await open_session(gw, host)
            await open_session(gw, host)
            s = gw.chat([user("no room")])  # both slots are pinned: the chat waits
            assert [type(e) for e in await take(s)] == [Queued]
            await gw.end_session(first)  # a slot is free again: the chat goes
            assert [type(e) for e in await take(s, 2)] == [QueueDone, PrefillDone]
            assert not host.violations
    run(main())


def test_a_crash_fails_in_flight_work_ends_its_sessions_and_sends_queued_work_elsewhere() -> None:
    async def main() -> None:
        w1, w2 = FakeHost("w1", capacity=2, num_slots=3), FakeHost("w2", ready=False)
        async with gateway(w1, w2) as gw:
            sid = await open_session(gw, w1)
            gen = gw.generate_stream(sid)
            chat = gw.chat([user("a")])
            waiting = gw.chat([user("b")])
            await settle()
            assert {gen.request_id, chat.request_id} <= set(w1.active)
            w2.recover()  # w2 comes up only now, with nothing free: waiting goes there
            await settle()
            assert waiting.request_id in w2.active
            queued_on_w2 = gw.chat([user("c")])
            w1.crash("CUDA error")
            for s in (gen, chat):
                end = terminal(await collect(s))
                assert isinstance(end, ErrorEvent) and end.code == "worker_crashed" and "CUDA error" in end.message
            with pytest.raises(UnknownSession, match="start a new session") as err:
                gw.generate_stream(sid)
            assert err.value.code == "worker_crashed"
            # late events from the dead worker for the failed request are dropped
            w1.sink("w1", Done(chat.request_id))
            await settle()
            assert gw.stats().requests.dropped_events >= 1
            # w1 is down: new work waits for w2 only; when w1 is back, the queue drains onto it
            assert gw.stats().workers[0].state == "error"
            w1.recover()
            await settle()
            assert queued_on_w2.request_id in w1.active
            assert not w1.violations and not w2.violations
    run(main())


def test_retryable_flag_on_crash_depends_on_session() -> None:
    async def main() -> None:
        w1 = FakeHost("w1", capacity=2, num_slots=3)
        async with gateway(w1) as gw:
            sid = await open_session(gw, w1)
            gen, chat = gw.generate_stream(sid), gw.chat([user("a")])
            await settle()
            w1.crash()
            gen_end, chat_end = terminal(await collect(gen)), terminal(await collect(chat))
            assert chat_end.retryable and not gen_end.retryable
    run(main())


def test_create_session_on_a_crashing_worker_raises_worker_crashed() -> None:
    async def main() -> None:
        host = FakeHost("w1")
        async with gateway(host) as gw:
            task = asyncio.create_task(gw.create_session("sys"))
            await settle()
            host.crash()
            with pytest.raises(WorkerCrashed):
                await task
            assert gw.stats().sessions == 0
    run(main())


def test_an_abandoned_create_session_is_cleaned_up() -> None:
    async def main() -> None:
        host = FakeHost("w1")
        async with gateway(host) as gw:
            queued_blocker = gw.chat([user("x")])
            waiting = asyncio.create_task(gw.create_session())
            await settle()
            waiting.cancel()  # still queued: just removed
            with pytest.raises(asyncio.CancelledError):
                await waiting
            assert gw.stats().queue.length == 0
            host.finish(queued_blocker.request_id)
            running = asyncio.create_task(gw.create_session())
            await settle()
            rid = next(c.request_id for c in host.commands if isinstance(c, CreateSession))
            running.cancel()
            await settle()
            host.finish(rid)  # it opened after all: the gateway ends it at once
            await settle()
            assert isinstance(host.commands[-1], EndSession)
            assert gw.stats().sessions == 0
    run(main())


def test_truncate_reply_goes_to_the_sessions_worker_and_reports_its_answer() -> None:
    """A barge-in's trimmed turn is written through the session API: the command reaches the
    session's worker; its Done returns, its error is raised with the worker's code."""
    async def main() -> None:
        w1, w2 = FakeHost("w1"), FakeHost("w2")
        async with gateway(w1, w2) as gw:
            sid = await open_session(gw, w1)
            task = asyncio.create_task(gw.truncate_reply(sid, "Hello the"))
            await settle()
            cmd = w1.commands[-1]
            assert isinstance(cmd, TruncateReply) and (cmd.session_id, cmd.text) == (sid, "Hello the")
            w1.finish(cmd.request_id)
            await task
            task = asyncio.create_task(gw.truncate_reply(sid, ""))
            await settle()
            w1.fail(w1.commands[-1].request_id, "invalid_request", "Nothing to truncate")
            with pytest.raises(OmnideskError, match="Nothing to truncate") as err:
                await task
            assert err.value.code == "invalid_request" and not any(isinstance(c, TruncateReply) for c in w2.commands)
            await gw.end_session(sid)
            with pytest.raises(UnknownSession):
                await gw.truncate_reply(sid, "x")
    run(main())
