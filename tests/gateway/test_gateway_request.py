"""The gateway's one request record: what the old second record kept as fields and flags is
derived from its command (session, a chat's conversation, side), and its life is one status."""

from __future__ import annotations

import asyncio

from desktop.gateway.request import Request, Status
from desktop.model.messages import Message
from desktop.protocol import AppendInput, Chat, CreateSession, EndSession, Generate


def test_the_record_derives_session_conversation_and_side_from_its_command() -> None:
    loop = asyncio.new_event_loop()
    try:
        msgs = (Message("user", "hi"),)
        chat = Request("c", Chat("c", msgs), loop.create_future(), history=b"h")
        assert chat.session_id is None and chat.messages == msgs and not chat.side and chat.status is Status.NEW
        append = Request("a", AppendInput("a", "s1", msgs), loop.create_future(), pin="w")
        assert append.session_id == "s1" and append.messages == () and not append.side  # only a chat mirrors
        assert Request("g", Generate("g", "s1"), loop.create_future()).session_id == "s1"
        assert Request("o", CreateSession("o", "s2"), loop.create_future()).session_id == "s2"
        end = Request("e", EndSession("e", "s1"), loop.create_future(), status=Status.RUNNING, worker_id="w")
        assert end.side and end.session_id == "s1" and end.status is Status.RUNNING
        assert chat.events is not append.events and chat.chunks is not append.chunks  # each its own
    finally:
        loop.close()
