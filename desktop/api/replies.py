"""One chat completion's answer from its gateway stream: a JSON completion, or server-sent events
as OpenAI streams them. Either way, a client that hangs up cancels the request."""

from __future__ import annotations

import asyncio
import json
import math
import time
from typing import Any, AsyncIterator, Callable

from fastapi import Request
from fastapi.responses import StreamingResponse

from desktop.api import schemas
from desktop.api.errors import from_engine
from desktop.protocol import TERMINAL, ChunkEvent, Done, ErrorEvent, Queued, QueueUpdate
from desktop.protocol.engine import RequestEvents

QUEUE_NOTE_EVERY_S = 1.0  # at most one queue comment per stream this often (the first goes at once)
DONE = b"data: [DONE]\n\n"


async def finished(stream: RequestEvents, request: Request) -> Done:
    """Run a non-streaming request to its end (a client that hangs up cancels it); an error
    becomes its ApiError."""
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
    return end


async def reply_json(stream: RequestEvents, request: Request, cid: str, model: str, created: int) -> dict[str, Any]:
    """Run a non-streaming chat request to its end; a client that hangs up cancels it."""
    end = await finished(stream, request)
    return schemas.completion(cid, model, created, end.text, end.stats)


async def _cancel_on_disconnect(request: Request, stream: RequestEvents) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass
    await stream.aclose()


async def reply_events(stream: RequestEvents, cid: str, model: str, created: int, include_usage: bool,
                       clock: Callable[[], float] = time.monotonic) -> AsyncIterator[bytes]:
    """Server-sent events as OpenAI streams them: a role chunk, content chunks, a finish chunk
    (then a usage chunk when asked), `[DONE]`. Queue positions go out as SSE comments, the first
    at once, then at most one per QUEUE_NOTE_EVERY_S (a client has little use for more; each is
    bytes to write and to parse); a failure after the start is an `error` event. A client that
    hangs up cancels the request.

    Each yield is one socket write, so frames that are due together go together: the role chunk
    with the first frame after it (a queue note or the first token), the finish and usage chunks
    with `[DONE]`."""
    content = ContentFrames(cid, model, created)
    noted = -math.inf
    lead = _sse(schemas.chunk(cid, model, created, {"role": "assistant", "content": ""}))
    try:
        async for event in stream:
            out = b""
            if isinstance(event, ChunkEvent):
                if event.text_delta:
                    out = content.frame(event.text_delta)
            elif isinstance(event, (Queued, QueueUpdate)):
                if (now := clock()) - noted >= QUEUE_NOTE_EVERY_S:
                    noted = now
                    out = f": queued, position {event.position}, starts in about {event.eta_s:.0f} s\n\n".encode()
            elif isinstance(event, Done):
                out = _sse(schemas.chunk(cid, model, created, {}, schemas.finish(event.stats)))
                if include_usage:
                    usage = schemas.usage(event.stats)
                    out += _sse(schemas.chunk(cid, model, created, {}, usage_=usage, choices=False))
            elif isinstance(event, ErrorEvent):
                out = _sse(from_engine(event.code, event.message).body())
            if isinstance(event, TERMINAL):  # the stream's last event
                yield lead + out + DONE
                return
            if out:
                yield lead + out
                lead = b""
        yield lead + DONE
    finally:
        await stream.aclose()


class EventStream(StreamingResponse):
    """A StreamingResponse of server-sent events whose frame carrying `[DONE]` also ends the body:
    one write where Starlette would make two (that frame, then an empty last chunk)."""

    media_type = "text/event-stream"

    async def stream_response(self, send: Any) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        ended = False
        async for frame in self.body_iterator:
            ended = frame.endswith(DONE)  # only reply_events' last frame does
            await send({"type": "http.response.body", "body": frame, "more_body": not ended})
        if not ended:
            await send({"type": "http.response.body", "body": b"", "more_body": False})


class ContentFrames:
    """The SSE frame of a content chunk, made by splicing the encoded text into the chunk's JSON
    encoded once per request (the same bytes as encoding the whole chunk each time)."""

    MARK = "\x00text\x00"

    def __init__(self, cid: str, model: str, created: int) -> None:
        frame = _sse(schemas.chunk(cid, model, created, {"content": self.MARK}))
        mark = _encode(self.MARK)
        self._head, _, self._tail = frame.rpartition(mark)  # the last: only fixed JSON follows the content

    def frame(self, text: str) -> bytes:
        return self._head + _encode(text) + self._tail


def _encode(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


def _sse(obj: dict[str, Any]) -> bytes:
    return b"data: " + _encode(obj) + b"\n\n"
