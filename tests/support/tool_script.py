"""A scripted gateway whose requests stream given replies, and a toolbox with one tool (add),
for the tool-round tests (no model, no MCP server)."""

from __future__ import annotations

import asyncio
import json

from desktop.protocol import ChunkEvent, Done, PrefillDone, TokenStats
from desktop.tools.results import ToolResult

ADD = {"type": "function", "function": {"name": "add", "description": "Add.",
                                         "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}


class Gateway:
    """Each request streams the next of `replies` (in two chunks)."""

    def __init__(self, replies: list[str]) -> None:
        self.replies, self.sent = list(replies), []

    def chat(self, messages, params, request_id=None, **kw):
        self.sent.append(messages)
        text = self.replies.pop(0)
        return Stream(self._events(text))

    async def _events(self, text):
        yield PrefillDone("r", 10, 0, "miss", 1.0, 0)
        half = len(text) // 2
        for part in (text[:half], text[half:]):
            yield ChunkEvent("r", part)
            await asyncio.sleep(0)
        yield Done("r", text, TokenStats(generated_tokens=3, finish_reason="stop"))

    async def cancel(self, request_id):
        pass


class Stream:
    request_id = "r"

    def __init__(self, events):
        self.events = events

    def __aiter__(self):
        return self.events


class Box:
    def __init__(self, answers=None):
        self.ran, self.answers = [], answers or {}

    def specs(self):
        return [ADD]

    async def call(self, name, arguments):
        self.ran.append((name, json.loads(arguments)))
        text, ok = self.answers.get(name, (str(sum(json.loads(arguments).values())), True))
        return ToolResult(text, ok, 0.25)
