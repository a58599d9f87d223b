"""ASGI middleware in front of the API: the key and the body's declared size are checked before
a byte of the body is read; the body is then read with a cap on its size and on its time."""

from __future__ import annotations

import asyncio
import hmac
from typing import Any

from desktop.api.errors import ApiError
from desktop.api.limits import Limits

KEY_HINT = "send it as 'Authorization: Bearer <key>' (the key is in Omnidesk's settings, Local API server)."


class GuardRequests:
    """401 without the key (when there is one), 413 for a body over `limits.max_body_bytes`
    (declared or as it streams), 408 for a body slower than `limits.body_timeout_s`. A refused
    request's connection is closed, so its unread body costs nothing. The app gets the body
    whole, already read (it reads it whole anyway)."""

    def __init__(self, app: Any, key: str | None, limits: Limits) -> None:
        self.app, self.key, self.limits = app, key, limits

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers", ()))
        error = self._refusal(headers)
        if error is None and _has_body(scope["method"], headers):
            body, error = await self._read_body(receive)
            if error is None:
                receive = _replay(body, receive)
        if error is not None:
            response = error.response()
            response.headers["connection"] = "close"
            return await response(scope, receive, send)
        await self.app(scope, receive, send)

    def _refusal(self, headers: dict[bytes, bytes]) -> ApiError | None:
        if self.key is not None:
            scheme, _, given = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode("latin-1"), self.key.encode()):
                return ApiError(401, f"Missing or incorrect API key: {KEY_HINT}", code="invalid_api_key")
        declared = headers.get(b"content-length", b"").strip()
        if declared and (not declared.isdigit() or int(declared) > self.limits.max_body_bytes):
            if not declared.isdigit():
                return ApiError(400, f"Content-Length must be a number of bytes, not {declared[:40].decode('latin-1')!r}.")
            return self._too_large(int(declared))
        return None

    async def _read_body(self, receive: Any) -> tuple[bytes, ApiError | None]:
        chunks, size = [], 0
        try:
            async with asyncio.timeout(self.limits.body_timeout_s):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        break
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > self.limits.max_body_bytes:
                        return b"", self._too_large(size, at_least=True)
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            return b"", ApiError(408, f"The request body did not arrive within {self.limits.body_timeout_s:g} s "
                                 f"({size:,} bytes came).", code="request_timeout")
        return b"".join(chunks), None

    def _too_large(self, size: int, at_least: bool = False) -> ApiError:
        mb = lambda n: f"{n / 2**20:.1f} MB"  # noqa: E731
        return ApiError(413, f"The request body is {'over ' if at_least else ''}{mb(size)}; this server accepts "
                        f"at most {mb(self.limits.max_body_bytes)}.",
                        code="request_too_large")


def _has_body(method: str, headers: dict[bytes, bytes]) -> bool:
    return method not in ("GET", "HEAD", "OPTIONS", "DELETE") or b"content-length" in headers \
        or b"transfer-encoding" in headers


def _replay(body: bytes, receive: Any) -> Any:
    """A receive that gives the body once, then waits on the connection (for its disconnect)."""
    sent = False

    async def replay() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()
    return replay
