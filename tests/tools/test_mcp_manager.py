"""The MCP client manager against the fixture server (stdio and streamable HTTP on 127.0.0.1):
tools listed, calls answered, and a timeout, an error result, a crash and a server that cannot
start each end with a clear message while the others go on."""

from __future__ import annotations

import asyncio
import json
import sys
import time

import pytest
from mcp_servers import free_port, http_server, stdio_config

from desktop.tools.config import ServerConfig
from desktop.tools.manager import ToolManager
from desktop.tools.results import FAILED, OFF, READY


def wait_for(manager: ToolManager, name: str, status: str, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = manager.state(name)
        if state.status == status:
            return state
        time.sleep(0.05)
    raise AssertionError(f"{name} is {manager.state(name)} after {timeout} s, not {status}")


def call(manager: ToolManager, name: str, args: dict, timeout: float | None = None):
    return asyncio.run(manager.call(name, json.dumps(args), timeout))


@pytest.fixture
def manager():
    m = ToolManager(start_timeout_s=30, call_timeout_s=20)
    yield m
    m.close()


def test_stdio_server_lists_and_calls_and_survives_errors(manager):
    seen = []
    manager.listeners.append(seen.append)
    manager.apply([stdio_config()])
    state = wait_for(manager, "fixture", READY)
    assert {t.name for t in state.tools} == {"add", "echo", "sleep", "fail", "crash"}
    assert state.summary() == "Ready: 5 tools"
    assert "fixture" in seen
    add = next(s for s in manager.specs() if s["function"]["name"] == "add")
    assert add["function"]["parameters"]["required"] == ["a", "b"]

    result = call(manager, "add", {"a": 2, "b": 40})
    assert (result.ok, result.text) == (True, "42") and result.seconds > 0

    bad = call(manager, "fail", {"message": "the disk is full"})
    assert not bad.ok and "returned an error" in bad.text and "the disk is full" in bad.text

    slow = call(manager, "sleep", {"seconds": 30}, timeout=0.5)
    assert not slow.ok and "did not answer within" in slow.text
    assert call(manager, "echo", {"text": "still here"}).text == "still here"  # the server goes on

    broken = call(manager, "echo", {"text": 1})  # the server refuses arguments of the wrong type
    assert not broken.ok

    crashed = call(manager, "crash", {})
    assert not crashed.ok and "stopped while running crash" in crashed.text
    assert manager.state("fixture").status == FAILED
    assert not call(manager, "add", {"a": 1, "b": 1}).ok  # gone: said, not raised

    manager.apply([stdio_config()])  # applied again: a failed server is retried
    wait_for(manager, "fixture", READY)
    assert call(manager, "add", {"a": 1, "b": 1}).text == "2"


def test_off_and_removed_servers_offer_no_tools(manager):
    manager.apply([stdio_config("a"), stdio_config("b", enabled=False)])
    wait_for(manager, "a", READY)
    assert manager.state("b").status == OFF
    assert all(t.server == "a" for t in manager.tools())
    manager.apply([stdio_config("b", enabled=False)])
    assert manager.tools() == [] and "a" not in manager.states()


def test_same_tool_names_on_two_servers_get_distinct_names(manager):
    manager.apply([stdio_config("a"), stdio_config("b")])
    wait_for(manager, "a", READY)
    wait_for(manager, "b", READY)
    names = [t.name for t in manager.tools()]
    assert len(names) == len(set(names)) == 10
    assert call(manager, "b_add", {"a": 1, "b": 2}).text == "3" or call(manager, "a_add", {"a": 1, "b": 2}).text == "3"


def test_a_server_that_cannot_start_says_why(manager):
    manager.apply([ServerConfig(name="nope", command="/no/such/mcp-server"),
                   ServerConfig(name="dies", command=sys.executable, args=["-c", "import sys; print('bad token', file=sys.stderr); sys.exit(2)"])])
    nope = wait_for(manager, "nope", FAILED)
    assert "not found" in nope.error
    dies = wait_for(manager, "dies", FAILED)
    assert "bad token" in dies.error and dies.summary().startswith("Failed: ")


def test_a_server_that_never_answers_fails_after_the_start_timeout():
    m = ToolManager(start_timeout_s=1.0)
    try:
        m.apply([ServerConfig(name="mute", command=sys.executable, args=["-c", "import time; time.sleep(60)"])])
        state = wait_for(m, "mute", FAILED, timeout=15)
        assert "did not answer within 1 s" in state.error
    finally:
        m.close()


def test_streamable_http_with_headers(manager):
    with http_server(token="t0ken") as url:
        manager.apply([ServerConfig(name="web", url=url, headers={"Authorization": "Bearer t0ken"}),
                       ServerConfig(name="nokey", url=url)])
        wait_for(manager, "web", READY)
        assert call(manager, "echo", {"text": "over http"}).text == "over http"
        nokey = wait_for(manager, "nokey", FAILED)
        assert "401" in nokey.error


def test_a_url_nobody_answers_fails_with_a_sentence(manager):
    manager.apply([ServerConfig(name="down", url=f"http://127.0.0.1:{free_port()}/mcp")])
    state = wait_for(manager, "down", FAILED)
    assert "could not connect" in state.error


def test_a_chat_turn_runs_a_real_tool_through_the_manager(manager, tmp_path):
    """The tool rounds (chat/tool_rounds.py) with the fixture server behind them: the call runs on
    the manager's loop, its result comes back into the conversation and the reply goes on."""
    from gw_helpers import run
    from tool_script import Gateway

    from desktop.chat.conversations import ConversationStore, StoredMessage
    from desktop.chat.reply import Reply
    from desktop.chat.tool_rounds import ONCE, ToolRounds
    from desktop.model.params import SamplingParams
    from desktop.model.tool_render import call_text

    manager.apply([stdio_config()])
    wait_for(manager, "fixture", READY)
    store = ConversationStore(tmp_path)
    conv = store.new("")
    Reply.ask(store, conv, StoredMessage("user", "2 + 40?"))
    gw = Gateway([call_text("add", json.dumps({"a": 2, "b": 40})), "42."])
    tasks = []

    def start(tools):
        reply = Reply(gw, store, conv, SamplingParams(), tools=tools)
        tasks.append(asyncio.ensure_future(reply.run()))
        return reply

    async def approve(info):
        return ONCE

    run(ToolRounds(start, store, conv, manager, approve).run(), timeout=30)
    assert [(m.role, m.content) for m in conv.messages[2:]] == [("tool", "42"), ("assistant", "42.")]
    assert {t["function"]["name"] for t in json.loads(gw.sent[0][0]["tools"])} == {"add", "echo", "sleep", "fail", "crash"}
