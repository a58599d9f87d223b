"""The call's draft of the user's words (desktop/call/draft.py) over the real gateway and a manual
fake worker: one draft in flight, the newest partial waiting wins; nothing of a turn goes in
after its final words; a dropped turn withdraws its draft; drafts wait for a cut's lane."""

from __future__ import annotations

import asyncio

from fake_host import FakeHost
from gw_helpers import gateway, run, settle

from desktop.call.draft import Draft
from desktop.call.session import CallSession
from desktop.call.tasks import CallTasks
from desktop.protocol import AppendInput, CreateSession, Generate, Stop


async def rig(host: FakeHost, gw) -> tuple[Draft, CallSession]:
    tasks = CallTasks()
    tasks.bind()
    session = CallSession(gw, tasks)
    opening = asyncio.create_task(session.open("Be brief."))
    await settle()
    host.finish(next(c.request_id for c in host.commands if isinstance(c, CreateSession)))
    await opening
    return Draft(session, tasks), session


def drafts(host: FakeHost) -> list[tuple[str, ...]]:
    """The words of each draft the worker got, in order (() for a withdrawal)."""
    return [tuple(m.content for m in c.messages) for c in host.commands if isinstance(c, AppendInput) and c.draft]


async def end_running(host: FakeHost) -> None:
    for rid in list(host.active):
        host.finish(rid)
    await settle()


def test_one_draft_in_flight_and_the_newest_partial_wins() -> None:
    async def main() -> None:
        host = FakeHost("w")
        async with gateway(host) as gw:
            draft, _ = await rig(host, gw)
            draft.begin()
            for text in ("what", "what is", "what is the", "  "):  # a blank partial is no news
                draft.partial(text)
                await settle()
            assert drafts(host) == [("what",)]  # the first is in flight; the others wait, newest kept
            await end_running(host)
            assert drafts(host) == [("what",), ("what is the",)]
            await end_running(host)
            assert drafts(host) == [("what",), ("what is the",)] and not host.active and not host.violations
    run(main())


def test_nothing_of_a_turn_goes_in_after_its_final_words() -> None:
    async def main() -> None:
        host = FakeHost("w", capacity=2)
        async with gateway(host) as gw:
            draft, session = await rig(host, gw)
            draft.begin()
            draft.partial("tell me")
            await settle()
            draft.partial("tell me a")  # waits behind the draft in flight
            turn = await draft.finish()  # the final words go with the reply, as Replies sends them
            async with session.lane:
                reply = session.generate(None, [{"role": "user", "content": "tell me a story"}])
            await settle()
            assert reply.request_id in host.active  # the draft in flight was stopped: no wait for it
            await end_running(host)
            assert drafts(host) == [("tell me",)]
            sent = [c for c in host.commands if isinstance(c, (AppendInput, Generate, Stop))]
            assert [type(c) for c in sent] == [AppendInput, Stop, Generate]
            assert sent[-1].messages[0].content == "tell me a story"
            assert turn.first_cached == 5 and turn.kept(12) == 7
            draft.partial("late words")  # a partial of the closed turn
            await settle()
            assert drafts(host) == [("tell me",)]
    run(main())


def test_a_dropped_turn_withdraws_its_draft_only_if_it_sent_one() -> None:
    async def main() -> None:
        host = FakeHost("w")
        async with gateway(host) as gw:
            draft, _ = await rig(host, gw)
            draft.begin()
            draft.withdraw()  # no words were drafted: nothing to send
            await settle()
            assert drafts(host) == []
            draft.begin()
            draft.partial("um so")
            await settle()
            draft.partial("um so I")
            draft.withdraw()  # cancelled: the waiting words are dropped, the draft withdrawn
            await end_running(host)
            await end_running(host)
            assert drafts(host) == [("um so",), ()]
            draft.withdraw()  # again: nothing left to withdraw
            await settle()
            assert drafts(host) == [("um so",), ()]
    run(main())


def test_drafts_wait_for_a_cut_to_trim_the_reply() -> None:
    async def main() -> None:
        host = FakeHost("w")
        async with gateway(host) as gw:
            draft, session = await rig(host, gw)
            await session.lane.acquire()  # a cut: cancel, wait for the reply, trim it
            draft.begin()
            draft.partial("sorry")
            await settle()
            assert drafts(host) == []
            session.lane.release()
            await settle()
            assert drafts(host) == [("sorry",)]
    run(main())


def test_a_draft_held_behind_a_cut_is_dropped_if_its_turn_ends_meanwhile() -> None:
    async def main() -> None:
        host = FakeHost("w")
        async with gateway(host) as gw:
            draft, session = await rig(host, gw)
            await session.lane.acquire()
            draft.begin()
            draft.partial("stop")  # taken by the sender, which waits for the lane
            await settle()
            await draft.finish()  # a short utterance: its final words come before the cut is done
            session.lane.release()
            await settle()
            assert drafts(host) == []
    run(main())


def test_partials_before_the_call_started_do_not_stop_later_drafts() -> None:
    async def main() -> None:
        host = FakeHost("w")
        async with gateway(host) as gw:
            tasks = CallTasks()
            session = CallSession(gw, tasks)
            draft = Draft(session, tasks)
            draft.begin()
            draft.partial("too early")  # no loop yet: nothing runs, nothing is stuck
            tasks.bind()
            opening = asyncio.create_task(session.open(None))
            await settle()
            host.finish(next(c.request_id for c in host.commands if isinstance(c, CreateSession)))
            await opening
            draft.partial("now")
            await settle()
            assert drafts(host) == [("now",)]
    run(main())
