"""Answers of requests that offered tools: the completion's message with `tool_calls` and
finish_reason "tool_calls", or the stream as OpenAI sends it — content deltas while the reply is
prose, then for each call a delta with its id and name and one with its arguments. Text that may
still turn into a call (a reply starting with `{`, or a `<tool_call>` marker on its way) is held
back until it is known; a reply that does not parse as calls goes out as text, finish "stop"."""

from __future__ import annotations

import secrets
from typing import Any, AsyncIterator

from desktop.api import schemas
from desktop.api.errors import from_engine
from desktop.api.replies import DONE, _sse
from desktop.api.tooling import CallMemory, ToolPlan, message_of, triples
from desktop.model.tool_calls import ParsedReply, marker_at, may_start_call
from desktop.protocol import TERMINAL, ChunkEvent, Done, ErrorEvent
from desktop.protocol.engine import RequestEvents


def call_ids(n: int) -> list[str]:
    return [f"call_{secrets.token_hex(12)}" for _ in range(n)]


def finish_json(body: dict[str, Any], plan: ToolPlan, memory: CallMemory) -> dict[str, Any]:
    """A completion (schemas.completion) whose text reads as tool calls, rewritten with them."""
    choice = body["choices"][0]
    text = choice["message"]["content"]
    reply = plan.read(text)
    if reply is not None:
        ids = call_ids(len(reply.calls))
        _remember(reply, ids, text, memory)
        choice["message"] = message_of(reply, ids)
        choice["finish_reason"] = "tool_calls"
    return body


def _remember(reply: ParsedReply, ids: list[str], text: str, memory: CallMemory) -> None:
    memory.put(triples(reply, ids), text)


async def tool_events(stream: RequestEvents, cid: str, model: str, created: int, include_usage: bool,
                      plan: ToolPlan, memory: CallMemory) -> AsyncIterator[bytes]:
    """Server-sent events of a request that offered tools (see the module's note)."""
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse(schemas.chunk(cid, model, created, delta, finish))

    text, sent, held = "", 0, True  # all of the reply; how much went out as content; whether it may be a call
    yield chunk({"role": "assistant", "content": ""})
    try:
        async for event in stream:
            if isinstance(event, ChunkEvent) and event.text_delta:
                text += event.text_delta
                if held and not may_start_call(text):
                    held = False
                if not held:  # prose: send up to a (possible) call marker
                    cut = marker_at(text[sent:])
                    end = len(text) if cut < 0 else sent + cut
                    if end > sent:
                        yield chunk({"content": text[sent:end]})
                        sent = end
            elif isinstance(event, Done):
                text = event.text or text  # what the slot generated (the same as the deltas)
                reply = plan.read(text)
                out = b""
                if reply is not None:
                    ids = call_ids(len(reply.calls))
                    _remember(reply, ids, text, memory)
                    if not sent and reply.content:
                        out += chunk({"content": reply.content})
                    for k, (i, call) in enumerate(zip(ids, reply.calls)):
                        out += chunk({"tool_calls": [{"index": k, "id": i, "type": "function",
                                                      "function": {"name": call.name, "arguments": ""}}]})
                        out += chunk({"tool_calls": [{"index": k, "function": {"arguments": call.arguments}}]})
                    finish = "tool_calls"
                else:
                    if len(text) > sent:
                        out += chunk({"content": text[sent:]})
                    finish = schemas.finish(event.stats)
                out += chunk({}, finish)
                if include_usage:
                    out += _sse(schemas.chunk(cid, model, created, {}, usage_=schemas.usage(event.stats), choices=False))
                yield out + DONE
                return
            elif isinstance(event, ErrorEvent):
                yield _sse(from_engine(event.code, event.message).body()) + DONE
                return
            if isinstance(event, TERMINAL):
                yield DONE
                return
        yield DONE
    finally:
        await stream.aclose()
