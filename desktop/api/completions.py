"""/v1/completions, OpenAI's text completions: a prompt in, its continuation out (JSON, or
server-sent `text_completion` chunks ending in `[DONE]`). The prompt goes to the worker as a raw
prompt (protocol Chat.raw: tokenised as is, no chat template), so a prompt that extends an
earlier one (and its completion) reuses that KV by token prefix; usage says how many of its
tokens were cached."""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict

from desktop.api import schemas
from desktop.api.errors import ApiError, from_engine, from_exception
from desktop.api.model_ids import check_model
from desktop.api.replies import DONE, QUEUE_NOTE_EVERY_S, EventStream, _sse, finished
from desktop.errors import QueueFullError
from desktop.protocol import TERMINAL, ChunkEvent, Done, ErrorEvent, Queued, QueueUpdate, TokenStats
from desktop.protocol.engine import EngineApi, RequestEvents

if TYPE_CHECKING:
    from desktop.api.app import Engine

DEFAULT_MAX_TOKENS = 16  # OpenAI's default for text completions


class CompletionRequest(BaseModel):
    """The fields acted on; others clients commonly send (user, logit_bias of {}…) are ignored."""

    model_config = ConfigDict(extra="allow")

    model: Any = None
    prompt: Any = None
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    max_completion_tokens: None = None  # chat's name only (ChatRequest.params reads it)
    stop: str | list[str] | None = None
    seed: int | None = None
    n: int | None = None
    best_of: int | None = None
    echo: bool | None = None
    logprobs: int | None = None
    suffix: str | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None

    def text(self) -> str:
        """The prompt: a string, or a list of exactly one string; 400 naming `prompt` otherwise."""
        prompt = self.prompt
        if isinstance(prompt, list):
            if len(prompt) != 1:
                raise ApiError(400, f"Only one prompt per request is supported (got a list of {len(prompt)}); "
                               "send them as separate requests.", param="prompt")
            prompt = prompt[0]
        if prompt is None:
            raise ApiError(400, "prompt is required: the text to continue.", param="prompt")
        if not isinstance(prompt, str):
            what = "token ids" if isinstance(prompt, (int, list)) else type(prompt).__name__
            raise ApiError(400, f"prompt must be text (got {what}); token-id prompts are not supported.", param="prompt")
        if not prompt:
            raise ApiError(400, "prompt is empty: send the text to continue.", param="prompt")
        return prompt

    def refuse_unsupported(self) -> None:
        """400 for what this server cannot do, rather than silently doing something else."""
        if self.echo:
            raise ApiError(400, "echo is not supported: the completion is returned without its prompt.", param="echo")
        for name in ("n", "best_of"):
            if getattr(self, name) not in (None, 1):
                raise ApiError(400, f"Only one completion per request is supported: {name} must be 1.", param=name)
        if self.logprobs:
            raise ApiError(400, "logprobs are not supported by this server.", param="logprobs")
        if self.suffix:
            raise ApiError(400, "suffix (fill in the middle) is not supported by this server.", param="suffix")
        for name in ("presence_penalty", "frequency_penalty"):
            if getattr(self, name):
                raise ApiError(400, f"{name} is not supported (only 0); the app's repetition penalty applies.",
                               param=name)

    def params(self, eng: Engine) -> Any:
        """The app's sampling defaults (replies of DEFAULT_MAX_TOKENS unless asked) with what the
        request sets, checked as a chat request's are."""
        defaults = replace(eng.defaults, max_tokens=DEFAULT_MAX_TOKENS)
        return schemas.ChatRequest.params(self, defaults, eng.gateway.context_length())  # type: ignore[arg-type]


def add_routes(app: FastAPI, current: Callable[[], Engine], retry_after: Callable[[EngineApi], float]) -> None:
    """POST /v1/completions on `app`; `current()` is the engine of the moment (raises when none)."""

    @app.post("/v1/completions")
    async def completions(body: CompletionRequest, request: Request) -> Response:
        eng = current()
        check_model(body.model, eng.model, eng.aliases)
        body.refuse_unsupported()
        prompt, params = body.text(), body.params(eng)
        try:
            stream = eng.gateway.chat([{"role": "user", "content": prompt}], params, origin="api", raw=True)
        except QueueFullError as err:
            raise from_exception(err, retry_after_s=retry_after(eng.gateway)) from None
        cid, created = f"cmpl-{stream.request_id}", int(time.time())
        if body.stream:
            usage = bool((body.stream_options or {}).get("include_usage"))
            return EventStream(completion_events(stream, cid, eng.model, created, usage),
                               headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        done = await finished(stream, request)
        return JSONResponse(completion(cid, eng.model, created, done.text, done.stats))


def completion(cid: str, model: str, created: int, text: str, stats: TokenStats) -> dict[str, Any]:
    return {"id": cid, "object": "text_completion", "created": created, "model": model,
            "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": schemas.finish(stats)}],
            "usage": schemas.usage(stats)}


def chunk(cid: str, model: str, created: int, text: str, finish_reason: str | None = None,
          usage: dict[str, Any] | None = None, *, choices: bool = True) -> dict[str, Any]:
    """One streamed text_completion; `choices=False`: the last, usage-only one (include_usage)."""
    body: dict[str, Any] = {"id": cid, "object": "text_completion", "created": created, "model": model,
                            "choices": [{"index": 0, "text": text, "logprobs": None,
                                         "finish_reason": finish_reason}] if choices else []}
    if usage is not None or not choices:
        body["usage"] = usage
    return body


async def completion_events(stream: RequestEvents, cid: str, model: str, created: int, include_usage: bool,
                            clock: Callable[[], float] = time.monotonic) -> AsyncIterator[bytes]:
    """Server-sent events as OpenAI streams a completion: text chunks, a finish chunk (then a
    usage chunk when asked), `[DONE]`; queue positions as SSE comments (at most one per
    QUEUE_NOTE_EVERY_S); a failure after the start is an `error` event. A client that hangs up
    cancels the request (the stream is closed)."""
    noted = -math.inf
    try:
        async for event in stream:
            out = b""
            if isinstance(event, ChunkEvent) and event.text_delta:
                out = _sse(chunk(cid, model, created, event.text_delta))
            elif isinstance(event, (Queued, QueueUpdate)):
                if (now := clock()) - noted >= QUEUE_NOTE_EVERY_S:
                    noted = now
                    out = f": queued, position {event.position}, starts in about {event.eta_s:.0f} s\n\n".encode()
            elif isinstance(event, Done):
                out = _sse(chunk(cid, model, created, "", schemas.finish(event.stats)))
                if include_usage:
                    out += _sse(chunk(cid, model, created, "", usage=schemas.usage(event.stats), choices=False))
            elif isinstance(event, ErrorEvent):
                out = _sse(from_engine(event.code, event.message).body())
            if isinstance(event, TERMINAL):
                yield out + DONE
                return
            if out:
                yield out
        yield DONE
    finally:
        await stream.aclose()
