"""ASGI middleware of the API: refuse Host headers that are not this computer's when served on
loopback (DNS rebinding), and count responses by route and status for /metrics."""

from __future__ import annotations

from typing import Any

from desktop.api.address import is_loopback
from desktop.api.errors import ApiError
from desktop.api.metrics import Metrics


class LocalHostOnly:
    """ASGI middleware: 400 unless the Host header names this computer (localhost, a loopback IP)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            host = dict(scope.get("headers", ())).get(b"host", b"").decode("latin-1")
            if host.startswith("["):  # [v6] or [v6]:port
                name = host[1:host.find("]")]
            else:  # name, v4 or name:port, v4:port (a bare v6 has more than one colon)
                name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
            if not is_loopback(name):
                err = ApiError(400, f"This server answers only requests addressed to this computer (Host: {host!r}).",
                               code="invalid_host")
                return await err.response()(scope, receive, send)
        await self.app(scope, receive, send)


class CountResponses:
    """ASGI middleware: counts responses by route and status for /metrics."""

    def __init__(self, app: Any, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope.get("path", "")
        route = path if path in ("/v1/models", "/v1/chat/completions", "/metrics", "/health") else \
            "/v1/models/{id}" if path.startswith("/v1/models/") else "other"

        async def counted(message: dict) -> None:
            if message["type"] == "http.response.start":
                self.metrics.http(route, message["status"])
            await send(message)

        await self.app(scope, receive, counted)
