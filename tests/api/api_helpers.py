"""Helpers for API tests: a gateway over the tiny model (one thread worker), the API app over it
(in process through httpx's ASGI transport, or served by uvicorn on 127.0.0.1 on a free port)."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, AsyncIterator, Awaitable

import httpx

from desktop.api.app import Engine, make_app
from desktop.api.metrics import Metrics
from desktop.api.server import ApiServer, ApiState
from desktop.gateway.gateway import Gateway
from desktop.model.loader import ModelSpec
from desktop.model.params import SamplingParams
from desktop.workers.config import WorkerConfig
from desktop.workers.thread_host import ThreadHost

MODEL = "tiny"


def run(coro: Awaitable[Any], timeout: float = 60.0) -> Any:
    async def main() -> Any:
        return await asyncio.wait_for(coro, timeout)
    return asyncio.run(main())


@dataclass
class Served:
    gateway: Gateway
    metrics: Metrics
    client: httpx.AsyncClient
    url: str = ""  # the real server's base URL (empty in process)


@asynccontextmanager
async def tiny_gateway(queue_max: int = 64, max_running: int = 2) -> AsyncIterator[Gateway]:
    config = WorkerConfig(num_slots=2, max_running=max_running, cache_min_tokens=4)
    gw = Gateway([ThreadHost("t0", ModelSpec("tiny"), config, threads=1)], queue_max=queue_max)
    await gw.start()
    try:
        assert await gw.wait_ready(timeout=60)
        yield gw
    finally:
        await gw.close()


@asynccontextmanager
async def served(*, key: str | None = None, real: bool = False, queue_max: int = 64,
                 max_running: int = 2) -> AsyncIterator[Served]:
    """The API over a fresh tiny-model gateway: in process, or (`real`) on 127.0.0.1:<free port>."""
    async with tiny_gateway(queue_max, max_running) as gw:
        metrics = Metrics()
        gw.observers.append(metrics.observe)
        engine = Engine(gw, MODEL, defaults=SamplingParams(max_tokens=8))
        build = lambda k, local=False: make_app(lambda: engine, key=k, metrics=metrics, local_only=local)  # noqa: E731
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        if not real:
            transport = httpx.ASGITransport(app=build(key))
            async with httpx.AsyncClient(transport=transport, base_url="http://api", headers=headers) as client:
                yield Served(gw, metrics, client)
            return
        server = ApiServer(build)
        status = await server.start("127.0.0.1", 0, key)
        assert status.state is ApiState.LISTENING, status
        try:
            async with httpx.AsyncClient(base_url=status.url, headers=headers, timeout=30) as client:
                yield Served(gw, metrics, client, status.url)
        finally:
            await server.stop()


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def sse_data(body: str) -> list[str]:
    """The data payloads of a server-sent event stream, in order."""
    return [line[len("data: "):] for line in body.splitlines() if line.startswith("data: ")]
