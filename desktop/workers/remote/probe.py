"""Health checks of a remote server: is it answering (GET /health, else /v1/models), and once, what
it serves: the model's name, its context window and how many slots it runs (llama.cpp: /props;
vLLM: max_model_len in /v1/models). Every answer is read up to a byte limit."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import httpx

from desktop.workers.remote.answers import Unusable, context_of, models_of, props_of
from desktop.workers.remote.reading import ERROR_BODY_LIMIT, IDENTITY, INFO_LIMIT, TooLong, read_capped
from desktop.workers.remote.spec import RemoteSpec
from desktop.workers.remote.wire import body_error

DEFAULT_SLOTS = 4  # a server that does not say how many requests it runs at once


class Unreachable(Exception):
    """The server did not answer, or answered that it cannot serve; str() says why in words."""

    def __init__(self, message: str, *, auth: bool = False) -> None:
        super().__init__(message)
        self.auth = auth


@dataclass(frozen=True, slots=True)
class ServerInfo:
    model: str  # what to send as "model" ("" when the server takes anything)
    name: str  # what to show
    context_length: int  # per slot; 0 when the server does not say
    slots: int
    llamacpp: bool  # has llama.cpp's slots: requests name one (id_slot) and ask for cache_prompt


def why(exc: Exception) -> str:
    """A transport failure in words."""
    if isinstance(exc, httpx.ConnectError):
        return "connection refused or host not found"
    if isinstance(exc, httpx.TimeoutException):
        return "no answer in time"
    if isinstance(exc, httpx.RemoteProtocolError):
        return "the connection was cut"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


async def _get(client: httpx.AsyncClient, spec: RemoteSpec, path: str, limit: int, *,
               cut: bool = False) -> tuple[int, bytes]:
    """(status, body) of a GET, the body read up to `limit` bytes (beyond: Unusable, or with `cut`
    its first `limit` bytes)."""
    try:
        async with client.stream("GET", spec.url + path, headers={**spec.headers, **IDENTITY}) as resp:
            return resp.status_code, await read_capped(resp, limit, cut=cut)
    except httpx.HTTPError as exc:
        raise Unreachable(why(exc)) from None
    except TooLong as exc:
        raise Unusable(f"{exc} ({path})") from None


async def check_health(client: httpx.AsyncClient, spec: RemoteSpec) -> None:
    """Raise Unreachable unless the server answers that it can serve. /health is what llama.cpp,
    vLLM and SGLang offer (llama.cpp says 503 while its model loads); others get /v1/models."""
    status, body = await _get(client, spec, "/health", ERROR_BODY_LIMIT, cut=True)
    if status == 404:
        status, body = await _get(client, spec, "/v1/models", ERROR_BODY_LIMIT, cut=True)
    if status in (401, 403):
        raise Unreachable(f"the server refused the API key (HTTP {status})", auth=True)
    if status != 200:
        detail = body_error(body)
        raise Unreachable(f"HTTP {status}" + (f": {detail}" if detail else ""))


async def describe(client: httpx.AsyncClient, spec: RemoteSpec) -> ServerInfo:
    """What the server serves; raises Unreachable when it does not answer or refuses the key, or
    when the configured model is not among those it lists; Unusable when what it says is not what
    an OpenAI-compatible server says (not a model list, an absurd context or slot count, a huge
    answer)."""
    status, body = await _get(client, spec, "/v1/models", INFO_LIMIT)
    if status in (401, 403):
        raise Unreachable(f"the server refused the API key (HTTP {status})", auth=True)
    models = models_of(body) if status == 200 else []
    ids = [m["id"] for m in models]
    if spec.model and ids and spec.model not in ids:
        listed = ", ".join(repr(i[:300]) for i in ids[:5])
        raise Unreachable(f"it does not serve the model {spec.model!r} (it serves {listed})")
    chosen = next((m for m in models if m["id"] == spec.model), models[0] if models else {})
    model = spec.model or chosen.get("id", "")
    context = context_of(chosen)
    status, body = await _get(client, spec, "/props", INFO_LIMIT)
    props = props_of(body) if status == 200 else None
    if props is not None:
        context = props.context or context
    slots = props.slots if props is not None else 0
    return ServerInfo(model=model, name=model.replace("\\", "/").rsplit("/", 1)[-1] or spec.url,
                      context_length=context, slots=spec.slots or slots or DEFAULT_SLOTS,
                      llamacpp=props is not None and props.llamacpp)


async def check_server(spec: RemoteSpec, timeout_s: float = 5.0) -> ServerInfo:
    """One look at a server (Settings' "Check"): does it answer, and what does it serve. Raises
    Unreachable with the reason."""
    async with httpx.AsyncClient(timeout=timeout_s, trust_env=False) as client:
        try:
            await asyncio.wait_for(check_health(client, spec), timeout_s)
            return await asyncio.wait_for(describe(client, spec), timeout_s)
        except asyncio.TimeoutError:
            raise Unreachable("no answer in time") from None
        except Unusable as exc:
            raise Unreachable(f"it cannot be used: {exc}") from None
