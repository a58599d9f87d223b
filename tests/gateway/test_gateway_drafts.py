"""The gateway's door for drafts and one-trip turns (issue 21): append_input(draft=True) with or
without words, generate_stream(messages=…) as one Generate carrying the words, the arguments
checked before anything is queued."""

from __future__ import annotations

import asyncio

import pytest

from desktop.errors import InvalidRequest
from desktop.protocol import AppendInput, CreateSession, Done, Generate
from fake_host import FakeHost
from gw_helpers import collect, gateway, run, settle, terminal, user


async def open_session(gw, host: FakeHost) -> str:
    task = asyncio.create_task(gw.create_session("Be brief."))
    await settle()
    host.finish(next(c.request_id for c in host.commands if isinstance(c, CreateSession)))
    return await task


def test_a_turns_words_and_reply_go_as_one_command_and_drafts_as_appends():
    async def main() -> None:
        host = FakeHost("w")
        async with gateway(host) as gw:
            sid = await open_session(gw, host)
            for words in ([user("what")], []):  # a draft, then its withdrawal
                stream = gw.append_input(sid, words, draft=True)
                await settle()
                host.finish(stream.request_id)
                assert isinstance(terminal(await collect(stream)), Done)
            reply = gw.generate_stream(sid, {"max_tokens": 4}, [{"role": "user", "content": "what time is it"}])
            await settle()
            host.finish(reply.request_id, "Noon.")
            assert isinstance(terminal(await collect(reply)), Done)
            sent = [c for c in host.commands if not isinstance(c, CreateSession)]
            assert [(type(c), getattr(c, "draft", None)) for c in sent] == [(AppendInput, True), (AppendInput, True), (Generate, None)]
            assert sent[1].messages == () and sent[2].messages == (user("what time is it"),) and sent[2].params.max_tokens == 4
            assert not host.violations
            with pytest.raises(InvalidRequest):
                gw.append_input(sid, [])  # only a draft may be empty (a withdrawal)
            with pytest.raises(InvalidRequest):
                gw.append_input(sid, [user("x")], draft="yes")
            with pytest.raises(InvalidRequest):
                gw.generate_stream(sid, None, "not a list")
    run(main())
