"""One chat completion's answer from its gateway stream: a JSON completion, or server-sent events
as OpenAI streams them. Either way, a client that hangs up cancels the request."""

from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncIterator

from fastapi import Request

from desktop.api import schemas
from desktop.api.errors import from_engine
from desktop.protocol import ChunkEvent, Done, ErrorEvent, Queued, QueueUpdate


async def reply_json(stream: Any, request: Request, cid: str, model: str, created: int) -> dict[str, Any]:
    """Run a non-streaming request to its end; a client that hangs up cancels it."""
    watcher = asyncio.ensure_future(_cancel_on_disconnect(request, stream))
    end = None
    try:
        async for event in stream:
            if isinstance(event, (Done, ErrorEvent)):
                end = event
    finally:
        watcher.cancel()
    if isinstance(end, ErrorEvent):
        raise from_engine(end.code, end.message, retry_after_s=1.0 if end.retryable else None)
    assert isinstance(end, Done)
    return schemas.completion(cid, model, created, end.text, end.stats)


async def _cancel_on_disconnect(request: Request, stream: Any) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass
    await stream.aclose()


async def reply_events(stream: Any, cid: str, model: str, created: int, include_usage: bool) -> AsyncIterator[bytes]:
    """Server-sent events as OpenAI streams them: a role chunk, content chunks, a finish chunk
    (then a usage chunk when asked), `[DONE]`. Queue positions go out as SSE comments; a
    failure after the start is an `error` event. A client that hangs up cancels the request."""
    try:
        yield _sse(schemas.chunk(cid, model, created, {"role": "assistant", "content": ""}))
        async for event in stream:
            if isinstance(event, ChunkEvent):
                if event.text_delta:
                    yield _sse(schemas.chunk(cid, model, created, {"content": event.text_delta}))
            elif isinstance(event, (Queued, QueueUpdate)):
                yield f": queued, position {event.position}, starts in about {event.eta_s:.0f} s\n\n".encode()
            elif isinstance(event, Done):
                yield _sse(schemas.chunk(cid, model, created, {}, schemas.finish(event.stats)))
                if include_usage:
                    yield _sse(schemas.chunk(cid, model, created, {}, usage_=schemas.usage(event.stats), choices=False))
            elif isinstance(event, ErrorEvent):
                yield _sse(from_engine(event.code, event.message).body())
        yield b"data: [DONE]\n\n"
    finally:
        await stream.aclose()


def _sse(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"
