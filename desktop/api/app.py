"""The FastAPI app: /v1/models, /v1/chat/completions (JSON or server-sent events),
/v1/completions (completions.py), /metrics and /health. Every chat goes through the gateway of
the moment (as the window's chats do), so API clients queue, route by history hash and reuse
the KV cache; errors keep OpenAI's JSON shape."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from desktop.api import completions, schemas, tooling
from desktop.api.errors import ApiError, from_exception, no_model
from desktop.api.metrics import Metrics
from desktop.api.model_ids import answers_to, check_model, not_found
from desktop.api.guard import GuardRequests
from desktop.api.limits import Limits
from desktop.api.middleware import CountResponses, LocalHostOnly
from desktop.api.replies import EventStream, reply_events, reply_json
from desktop.api.tool_replies import finish_json, tool_events
from desktop.errors import OmnideskError, QueueFullError
from desktop.model.image_door import check_count, count_images, decode_images
from desktop.model.params import SamplingParams
from desktop.protocol.engine import EngineApi

log = logging.getLogger(__name__)
OWNER = "omnidesk"
# FastAPI's OpenTelemetry hooks: off (a local app exports no spans of its users' requests, and
# each request would otherwise look up the providers)
NO_TELEMETRY: dict[str, Any] = {"tracing": False, "metrics": False, "logs": False, "operation_spans": False}


@dataclass(frozen=True, slots=True)
class Engine:
    """What the API serves with at one moment: the current gateway, the loaded model's name,
    whether it reads images, the app's sampling defaults, and the model's other names (the
    settings' source: model_ids.aliases) that requests may give in `model`."""

    gateway: EngineApi
    model: str
    supports_images: bool = False
    defaults: SamplingParams = field(default_factory=SamplingParams)
    aliases: tuple[str, ...] = ()


EngineSource = Callable[[], "Engine | None"]  # None: no model can answer now


def make_app(engine: EngineSource, *, key: str | None = None, loading: Callable[[], bool] = lambda: False,
             metrics: Metrics | None = None, local_only: bool = False, limits: Limits = Limits()) -> FastAPI:
    """The ASGI app. `engine()` is read on every request, so the API follows model reloads;
    `loading()` tells a model on its way (503 with Retry-After) from none; with `key`, every
    request needs `Authorization: Bearer <key>`, checked (with the body's size: `limits`) before
    the body is read. `local_only` (served on loopback) refuses a Host header that is not this
    computer's: a web page whose domain was re-pointed at 127.0.0.1 (DNS rebinding) cannot use
    the API through the user's browser."""
    app = FastAPI(title="Omnidesk local API", docs_url=None, redoc_url=None, openapi_url=None,
                  telemetry=NO_TELEMETRY)

    def current() -> Engine:
        eng = engine()
        if eng is None:
            raise no_model(loading())
        return eng

    calls = tooling.CallMemory()  # the generated text of the tool calls returned (tool rounds hit the KV)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        eng = engine()
        return {"object": "list", "data": [_model(eng.model)] if eng else []}

    @app.get("/v1/models/{name:path}")
    async def model(name: str) -> dict[str, Any]:
        eng = engine()
        if eng is None or not answers_to(name, eng.model, eng.aliases):
            raise not_found(name, eng.model if eng else None)
        return _model(eng.model)

    @app.post("/v1/chat/completions")
    async def chat(body: schemas.ChatRequest, request: Request) -> Response:
        eng = current()
        check_model(body.model, eng.model, eng.aliases)
        body.refuse_unsupported()
        plan = tooling.plan_of(body)
        messages = tooling.tool_messages(body.chat_messages(eng.supports_images, eng.model), plan, calls)
        if count_images(messages):  # counted here; checked and decoded on a thread, never on the loop
            check_count(messages)
            messages = await asyncio.to_thread(decode_images, messages)
        params = body.params(eng.defaults, eng.gateway.context_length())
        if plan.grammar:
            params = replace(params, grammar=plan.grammar)
        try:
            stream = eng.gateway.chat(messages, params, origin="api", overflow=body.overflow())
        except QueueFullError as err:
            raise from_exception(err, retry_after_s=retry_after(eng.gateway)) from None
        cid, created = f"chatcmpl-{stream.request_id}", int(time.time())
        if body.stream:
            usage = bool((body.stream_options or {}).get("include_usage"))
            events = (tool_events(stream, cid, eng.model, created, usage, plan, calls) if plan.parses
                      else reply_events(stream, cid, eng.model, created, usage))
            return EventStream(events, headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        result = await reply_json(stream, request, cid, eng.model, created)
        return JSONResponse(finish_json(result, plan, calls) if plan.parses else result)

    completions.add_routes(app, current, retry_after)

    @app.get("/metrics")
    async def prometheus() -> Response:
        if metrics is None:
            raise ApiError(404, "Metrics are not enabled.", code="not_found")
        return Response(metrics.render(), media_type=metrics.content_type)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        eng = engine()
        return {"status": "ok" if eng else "loading" if loading() else "no_model", "model": eng.model if eng else None}

    _handlers(app)
    app.add_middleware(GuardRequests, key=key, limits=limits)  # innermost: inside the Host check and the counting
    if local_only:
        app.add_middleware(LocalHostOnly)
    if metrics is not None:
        app.add_middleware(CountResponses, metrics=metrics)
    return app


def retry_after(gateway: EngineApi) -> float:
    """Seconds until the queue should have room: its length × the mean service time ÷ capacity."""
    try:
        stats = gateway.stats()
        capacity = sum(max(w.capacity, 1) for w in stats.workers) or 1
        return max(1.0, math.ceil(stats.queue.length * stats.queue.service_avg_s / capacity))
    except Exception:  # never let a hint turn a 429 into a 500
        return 1.0


def body_error(err: RequestValidationError, content_type: str) -> ApiError:
    """A 400 that names what is wrong with the body: not JSON (where, why), not sent as JSON (the
    Content-Type; a body of another type is not read as JSON, so a web page cannot post to the
    local API without the browser asking first), or a field (named as `param`)."""
    first = (err.errors() or [{}])[0]
    loc = [p for p in first.get("loc", ()) if p != "body"]
    if first.get("type") == "json_invalid":
        reason = (first.get("ctx") or {}).get("error", "it cannot be parsed")
        at = f"at character {loc[0]}: " if loc else ""
        return ApiError(400, f"The request body is not valid JSON ({at}{reason}).")
    what = str(first.get("msg", "is not valid")).removeprefix("Value error, ")
    if loc:
        where = ".".join(map(str, loc))
        return ApiError(400, f"{where}: {what}", param=where)
    if not is_json(content_type):
        got = f"it was sent as {content_type.split(';')[0].strip()}" if content_type else "it had no Content-Type"
        return ApiError(400, "The request body must be JSON sent with the header 'Content-Type: application/json' "
                        f"({got}; with curl, add -H 'Content-Type: application/json').")
    if first.get("type") == "missing":
        return ApiError(400, "The request body is empty: send the chat request as a JSON object.")
    if first.get("type") in ("dict_type", "model_attributes_type"):
        return ApiError(400, "The request body must be a JSON object (with messages, model, …), "
                        f"not {type(first.get('input')).__name__}.")
    return ApiError(400, f"The request body is not valid: {what}")


def is_json(content_type: str) -> bool:
    kind = content_type.split(";")[0].strip().lower()
    return kind == "application/json" or (kind.startswith("application/") and kind.endswith("+json"))


def _model(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": 0, "owned_by": OWNER}


def _handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(_: Request, err: ApiError) -> JSONResponse:
        return err.response()

    @app.exception_handler(OmnideskError)
    async def engine_error(_: Request, err: OmnideskError) -> JSONResponse:
        return from_exception(err, retry_after_s=1.0 if err.retryable else None).response()

    @app.exception_handler(RequestValidationError)
    async def bad_body(request: Request, err: RequestValidationError) -> JSONResponse:
        return body_error(err, request.headers.get("content-type", "")).response()

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, err: HTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(err.status_code)
        message = f"{request.method} {request.url.path}: {err.detail}" if code else str(err.detail)
        return ApiError(err.status_code, message, code=code).response()

    @app.exception_handler(Exception)
    async def crash(_: Request, err: Exception) -> JSONResponse:
        log.exception("The API failed on a request")
        return ApiError(500, f"Internal error: {type(err).__name__}: {err}", type="server_error").response()
