"""A conversation whose worker went away (removed, unreachable, restarted) is rebuilt by another
worker on its next turn, and that turn's miss reason names the worker it was cached on and why it
left; a turn that misses for another reason (a new conversation, even with the same system
prompt) keeps the worker's own reason, and the move is told once."""

from __future__ import annotations

import pytest

from desktop.model.messages import Message
from desktop.protocol import Done, WorkerState, WorkerStatus
from fake_host import FakeHost
from gw_helpers import bot, gateway, run, settle, terminal, turn, user

SYSTEM = Message("system", "Be brief.")


async def unreachable(host: FakeHost) -> None:
    """A remote worker's server stops answering (as workers/remote/host.py reports it)."""
    host.sink(host.worker_id, WorkerStatus(host.worker_id, WorkerState.ERROR, "no answer from the server",
                                           code="remote_unreachable"))
    await settle()


async def removed(gw, host: FakeHost) -> None:  # noqa: ANN001
    await gw.remove_host(host.worker_id)


async def restarted(gw, host: FakeHost) -> None:  # noqa: ANN001
    host.crash("segfault", restarting=True)
    await settle()


@pytest.mark.parametrize("leave, why", [("removed", "removed"), ("unreachable", "unreachable"),
                                        ("restarted", "restarted")])
def test_the_next_turn_on_another_worker_says_where_the_conversation_moved_from(leave: str, why: str) -> None:
    async def main() -> None:
        a, b = FakeHost("a"), FakeHost("b")
        hosts = (a, b)
        async with gateway(a, b) as gw:
            first = [SYSTEM, user("hi")]
            was, _ = await turn(gw, hosts, first, "Hello.")
            gone = a if was == "a" else b
            if leave == "removed":
                await removed(gw, gone)
            elif leave == "unreachable":
                await unreachable(gone)
            else:
                await restarted(gw, gone)
            second = first + [bot("Hello."), user("more")]
            now, events = await turn(gw, hosts, second, "More.")
            done = terminal(events)
            assert isinstance(done, Done) and now != was
            assert (done.stats.kind, done.stats.worker) == ("miss", now)
            assert done.stats.miss_reason == f"moved from {was} ({why})"
            _, events = await turn(gw, hosts, second + [bot("More."), user("again")])
            assert (terminal(events).stats.kind, terminal(events).stats.miss_reason) == ("extend", "")
    run(main())


def test_a_new_conversation_keeps_its_own_reason_after_a_move_and_a_move_is_told_once() -> None:
    async def main() -> None:
        a, b = FakeHost("a"), FakeHost("b", num_slots=1)
        hosts = (a, b)
        async with gateway(a, b) as gw:
            first = [SYSTEM, user("hi")]
            was, _ = await turn(gw, hosts, first, "Hello.")
            assert was == "a"  # the first free slot in the pool's order
            await gw.remove_host("a")
            _, events = await turn(gw, hosts, [SYSTEM, user("something else")])  # same system prompt, new
            assert terminal(events).stats.miss_reason == "new conversation"
            second = first + [bot("Hello."), user("more")]
            _, events = await turn(gw, hosts, second, "More.")  # evicts the new one from b's only slot
            assert terminal(events).stats.miss_reason == "moved from a (removed)"
            _, events = await turn(gw, hosts, [user("third")])  # evicts it in turn
            _, events = await turn(gw, hosts, second, "More.")  # a regenerate, missing again on b
            assert terminal(events).stats.miss_reason == "not cached since the model loaded"
    run(main())


def test_a_worker_that_restarts_and_serves_the_turn_itself_keeps_its_own_reason() -> None:
    async def main() -> None:
        a = FakeHost("a")
        async with gateway(a) as gw:
            first = [user("hi")]
            await turn(gw, (a,), first, "Hello.")
            a.crash("segfault", restarting=True)
            await settle()
            a.recover()
            await settle()
            _, events = await turn(gw, (a,), first + [bot("Hello."), user("more")])
            done = terminal(events)
            assert (done.stats.kind, done.stats.worker) == ("miss", "a")
            assert done.stats.miss_reason == "not cached since the model loaded"
    run(main())
