"""The stream of a request that offered tools, from scripted gateway events: prose goes out as it
comes, a call marker is held back until known, calls go out as OpenAI's tool_calls deltas, and a
reply that is no call ends as text (nothing held back is lost)."""

from __future__ import annotations

import asyncio
import json

from desktop.api.tool_replies import tool_events
from desktop.api.tooling import CallMemory, ToolPlan
from desktop.protocol import ChunkEvent, Done, TokenStats

PLAN = ToolPlan([{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}])


class Script:
    def __init__(self, deltas: list[str]) -> None:
        self.request_id = "r1"
        self.events = [ChunkEvent("r1", d) for d in deltas] + [Done("r1", "".join(deltas), TokenStats(finish_reason="stop"))]

    def __aiter__(self):
        return self

    async def __anext__(self):
        if not self.events:
            raise StopAsyncIteration
        return self.events.pop(0)

    async def aclose(self) -> None:
        self.events = []


def frames(deltas: list[str], memory: CallMemory | None = None) -> list[dict]:
    async def main() -> list[bytes]:
        return [f async for f in tool_events(Script(deltas), "c1", "m", 0, False, PLAN, memory or CallMemory())]
    body = b"".join(asyncio.run(main())).decode()
    return [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: {")]


def test_prose_then_a_call() -> None:
    memory = CallMemory()
    deltas = ["Let me ", "look. <tool", '_call>\n{"name": "search", ', '"arguments": {"q": "tea"}}\n</tool_call>']
    chunks = frames(deltas, memory)
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert content == "Let me look. "  # the marker never went out as text
    calls = [tc for c in chunks for tc in c["choices"][0]["delta"].get("tool_calls", [])]
    assert calls[0]["id"].startswith("call_") and calls[0]["function"] == {"name": "search", "arguments": ""}
    assert json.loads(calls[1]["function"]["arguments"]) == {"q": "tea"} and calls[1]["index"] == 0
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert memory.get([(calls[0]["id"], "search", calls[1]["function"]["arguments"])]) == "".join(deltas)


def test_text_with_brackets_that_is_no_call_ends_as_text() -> None:
    deltas = ["{not ", "json} and <tool", " talk"]
    chunks = frames(deltas)
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) == "".join(deltas)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    prose = frames(["Hello ", "there <", "b>!"])  # a "<" that may open a marker waits for what follows
    assert [c["choices"][0]["delta"].get("content") for c in prose[1:-1]] == ["Hello ", "there ", "<b>!"]
