"""uvicorn's HTTP connection (httptools) with the API's limits: a bounded number of connections
(503 with Retry-After past it), bounded heads in bounded time, no response stuck on a client."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from desktop.api.errors import ApiError
from desktop.api.limits import Limits

log = logging.getLogger(__name__)


class Gate:
    """The connections of one server: those served (oldest first), and those waiting for their 503."""

    def __init__(self) -> None:
        self.served: dict[LimitedHttpProtocol, None] = {}
        self.waiting: set[LimitedHttpProtocol] = set()
        self.dropped = 0  # connections closed at once: even the waiting room was full

    def evict_idle(self) -> bool:
        """Close the oldest served connection that is waiting for a request and has sent none of
        it (a new client is worth more than an idle one); False when every one is busy."""
        for conn in self.served:
            if conn.idle:
                del self.served[conn]
                conn.transport.abort()
                return True
        return False


def closing(error: ApiError) -> Any:
    """An ASGI app that answers `error` and closes the connection."""
    async def app(scope: dict, receive: Any, send: Any) -> None:
        response = error.response()
        response.headers["connection"] = "close"
        await response(scope, receive, send)
    return app


def limited_protocol(limits: Limits) -> type[HttpToolsProtocol]:
    """The protocol class for one server (uvicorn.Config(http=...)): its connections share a Gate."""
    busy = ApiError(503, f"Too many connections to the local API (at most {limits.max_connections} at once); "
                    "try again in a moment.", type="server_error", code="too_many_connections",
                    retry_after_s=limits.retry_after_s)
    too_large = ApiError(431, f"The request's headers are larger than {limits.max_head_bytes // 1024} KB.",
                         code="headers_too_large")
    return type("LimitedHttpProtocol", (LimitedHttpProtocol,),
                {"limits": limits, "gate": Gate(), "busy": staticmethod(closing(busy)),
                 "too_large": staticmethod(closing(too_large))})


class LimitedHttpProtocol(HttpToolsProtocol):
    """One HTTP connection. Its head timer runs from the connection (or the end of a response)
    to the end of the next request's headers; it is not reset by data, so a client that sends its
    headers a byte at a time (slowloris) or nothing at all is cut when it expires."""

    limits: Limits
    gate: Gate
    busy: Any
    too_large: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_raw = 0  # bytes received while reading the head (a bound on its size)
        self._head_size = 0  # the head's size as parsed (the URL and the headers)
        self._write_timer: asyncio.TimerHandle | None = None  # runs while the client reads nothing

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        gate = self.gate
        if len(gate.served) < self.limits.max_connections or gate.evict_idle():
            gate.served[self] = None
        elif len(gate.waiting) < self.limits.max_waiting:
            gate.waiting.add(self)
            self.app = self.busy  # its request, once its head has come, is answered 503
        else:
            gate.dropped += 1
            if gate.dropped == 1 or gate.dropped % 1000 == 0:
                log.warning("Local API: more than %d connections at once; %d dropped so far",
                            self.limits.max_connections + self.limits.max_waiting, gate.dropped)
            transport.abort()
            return
        self._expect_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self.gate.served.pop(self, None)
        self.gate.waiting.discard(self)
        self._cancel_head_timer()
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None
        super().connection_lost(exc)

    @property
    def idle(self) -> bool:
        """Waiting for a request of which not a byte has come (new, or kept alive after a response)."""
        return self._head_timer is not None and self._head_raw == 0 and not self.transport.is_closing()

    def data_received(self, data: bytes) -> None:
        reading_head = self._head_timer is not None
        if reading_head:
            self._head_raw += len(data)
        super().data_received(data)
        if reading_head and self._head_timer is not None and self._head_raw > self.limits.max_head_bytes \
                and not self.transport.is_closing():
            self._refuse(431, "Request Header Fields Too Large")

    def on_url(self, url: bytes) -> None:
        self._head_size += len(url)
        if self._head_size <= self.limits.max_head_bytes:
            super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_size += len(name) + len(value) + 4
        if self._head_size <= self.limits.max_head_bytes:
            super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._cancel_head_timer()
        served_by = self.app
        if self._head_size > self.limits.max_head_bytes:  # came whole in one read
            self.app = self.too_large
        try:
            super().on_headers_complete()
        finally:
            self.app = served_by

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._expect_head()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._write_timer is None:
            self._write_timer = self.loop.call_later(self.limits.write_stall_s, self._write_stalled)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None

    def _write_stalled(self) -> None:
        """The client has read nothing for write_stall_s: drop it (the app sees a disconnect)."""
        self._write_timer = None
        log.info("Local API: a client read nothing of its response for %g s; its connection was closed",
                 self.limits.write_stall_s)
        self.transport.abort()

    def _expect_head(self) -> None:
        self._cancel_head_timer()
        self._head_raw = self._head_size = 0
        self._head_timer = self.loop.call_later(self.limits.head_timeout_s, self._head_late)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if self.transport.is_closing():
            return
        if self._head_raw:  # a request begun but not finished: tell the client why
            self._refuse(408, "Request Timeout")
        else:  # idle: close quietly, as keep-alive does
            self.transport.close()

    def _refuse(self, status: int, reason: str) -> None:
        """Answer in plain bytes (no request to hand the app) and close."""
        self._cancel_head_timer()
        body = f"{status} {reason}: the request's headers must be at most {self.limits.max_head_bytes // 1024} KB " \
               f"and arrive within {self.limits.head_timeout_s:g} s.".encode()
        self.transport.write(b"".join([f"HTTP/1.1 {status} {reason}\r\n".encode(),
                                       b"content-type: text/plain; charset=utf-8\r\n",
                                       b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body), body]))
        self.transport.close()
