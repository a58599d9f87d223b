"""Issue 8, items 2 and 5 at the gateway: bad values (messages=None, strings for numbers, lone
surrogates, unknown kinds, oversized text) passed to Gateway.chat and the session APIs are refused
at once with a coded InvalidRequest, and no worker ever sees them."""

from __future__ import annotations

import asyncio
import math
import time

import pytest

from desktop.protocol import CreateSession
from desktop.errors import ContextOverflow, InvalidRequest, UnknownSession
from fake_host import FakeHost
from gw_helpers import gateway, run, settle, user

pytestmark = pytest.mark.hardening

OK = [{"role": "user", "content": "hello"}]

BAD_CHATS = [
    ((None,), {}, "list"),
    ((5,), {}, "list"),
    (([{"role": "user", "content": "x\udfff"}],), {}, "U+DFFF"),
    (([{"role": "robot", "content": "hi"}],), {}, "robot"),
    (([{"role": "user"}],), {}, "content"),
    ((OK, {"temperature": "0.5"}), {}, "temperature"),
    ((OK, {"seed": 2**70}), {}, "seed"),
    ((OK, {"top_k": 1.5}), {}, "top_k"),
    ((OK, {"stop": (123,)}), {}, "stop"),
    ((OK, {"top_p": math.nan}), {}, "top_p"),
    ((OK, {"max_tokens": "10"}), {}, "max_tokens"),
    ((OK, {"tempreature": 0.5}), {}, "tempreature"),
    ((OK, "hot"), {}, "sampling"),
    ((OK,), {"request_id": 5}, "request id"),
]


@pytest.mark.parametrize("args, kwargs, words", BAD_CHATS, ids=[w for *_, w in BAD_CHATS])
def test_bad_chat_is_refused_at_the_door(args, kwargs, words) -> None:
    async def main() -> None:
        host = FakeHost("w")
        async with gateway(host) as gw:
            with pytest.raises(InvalidRequest) as err:
                gw.chat(*args, **kwargs)
            assert words.lower() in err.value.message.lower() and err.value.code == "invalid_request"
            assert not host.commands and gw.stats().requests.submitted == 0
            gw.chat(OK)  # the gateway still serves
            await settle()
            assert len(host.active) == 1
    run(main())


def test_bad_session_input_is_refused_at_the_door() -> None:
    async def main() -> None:
        host = FakeHost("w", capacity=2)
        async with gateway(host) as gw:
            for system, words in (("Be \udfff", "U\\+DFFF"), (5, "system"), ("x" * 3_000_000, "characters")):
                with pytest.raises(InvalidRequest, match=words):
                    await asyncio.wait_for(gw.create_session(system), 1.0)
            assert not any(isinstance(c, CreateSession) for c in host.commands)
            task = asyncio.create_task(gw.create_session("Be brief."))
            await settle()
            host.finish(host.commands[-1].request_id)
            sid = await task
            for messages, words in ((None, "list"), ([{"role": "user", "content": "\ud800"}], "U\\+D800"),
                                    ([{"role": "user", "content": "x" * 3_000_000}], "characters")):
                with pytest.raises(InvalidRequest, match=words):
                    gw.append_input(sid, messages)
            for params, words in (({"seed": "abc"}, "seed"), ({"temperature": math.inf}, "temperature"), ("hot", "(?i)sampling")):
                with pytest.raises(InvalidRequest, match=words):
                    gw.generate_stream(sid, params)
            for bad_id in (["s"], None, 5):
                with pytest.raises(UnknownSession):
                    gw.append_input(bad_id, [user("hi")])
                with pytest.raises(UnknownSession):
                    gw.generate_stream(bad_id)
            with pytest.raises(InvalidRequest, match="request id"):
                await gw.cancel(["r"])  # type: ignore[arg-type]
            assert len(host.commands) == 1
    run(main())


def test_a_huge_message_is_refused_before_any_tokenizing_naming_the_limit() -> None:
    async def main() -> None:
        host = FakeHost("w", context_length=2048)
        async with gateway(host) as gw:
            t0 = time.perf_counter()
            with pytest.raises(ContextOverflow) as err:
                gw.chat([user("x" * 10_000_000)])
            assert time.perf_counter() - t0 < 0.2
            assert "16,384" in err.value.message and "2,048" in err.value.message
            with pytest.raises(ContextOverflow, match="16,384"):  # the whole request counts too (no slide)
                gw.chat([user("y" * 9_000), user("z" * 9_000)], overflow="error")
            assert not host.commands
            gw.chat([user("y" * 9_000), user("z" * 9_000)])  # sliding, the oldest messages leave the model's view
            await asyncio.sleep(0.05)
            assert host.commands
    run(main())
