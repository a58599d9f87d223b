"""Start and stop uvicorn on the running asyncio loop (the app's qasync loop: no second loop, no
thread), with its real state: off, starting, listening, port in use or error. Binding is done
here, so a taken port is a state to show, never uvicorn's sys.exit; its signal handlers are not
installed (the app owns Ctrl+C)."""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable

import anyio
import uvicorn

from desktop.api.address import is_loopback
from desktop.api.connections import limited_protocol
from desktop.api.limits import Limits

log = logging.getLogger(__name__)
GRACE_S = 1.0  # on stop, running responses get this long before they are cancelled


class ApiState(str, Enum):
    OFF = "off"
    STARTING = "starting"
    LISTENING = "listening"
    PORT_IN_USE = "port_in_use"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class ApiStatus:
    state: ApiState
    host: str = ""
    port: int = 0
    message: str = ""

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}" if self.port else ""

    def describe(self) -> str:
        """The state in words, for the settings page and the log."""
        if self.state is ApiState.LISTENING:
            return f"Listening on {self.url}"
        if self.state is ApiState.STARTING:
            return "Starting…"
        if self.state is ApiState.OFF:
            return "Off"
        return self.message


class ApiServer:
    """One uvicorn server at a time. `make_app(key, local_only)` builds the ASGI app for a start
    (local_only: served on loopback); listeners are called with each new ApiStatus. `limits`
    bound its connections and their request heads (the app bounds the bodies). Call everything
    on the app's loop."""

    def __init__(self, make_app: Callable[[str | None, bool], Any], limits: Limits = Limits()) -> None:
        self._make_app = make_app
        self.limits = limits
        self.listeners: list[Callable[[ApiStatus], None]] = []
        self.status = ApiStatus(ApiState.OFF)
        self._server: uvicorn.Server | None = None
        self._sock: socket.socket | None = None
        self._ticker: asyncio.Task | None = None
        self._stopping = asyncio.Event()
        self._lock = asyncio.Lock()

    async def start(self, host: str, port: int, key: str | None = None) -> ApiStatus:
        """(Re)start on host:port (port 0: any free port). Never raises for a bind failure: the
        returned status says port in use or error. Beyond loopback, a key is required."""
        async with self._lock:
            await self._stop()
            if not is_loopback(host) and not key:
                return self._set(ApiStatus(ApiState.ERROR, host, port, "An API key is required to listen on "
                                           f"{host} (other computers could reach it); set one, or use 127.0.0.1."))
            self._set(ApiStatus(ApiState.STARTING, host, port))
            try:
                sock = bind(host, port)
            except OSError as exc:
                if exc.errno in (errno.EADDRINUSE, getattr(errno, "WSAEADDRINUSE", -1)):
                    message = f"Port {port} is in use by another program; choose another port."
                    return self._set(ApiStatus(ApiState.PORT_IN_USE, host, port, message))
                why = exc.strerror or str(exc)
                return self._set(ApiStatus(ApiState.ERROR, host, port, f"Could not listen on {host}:{port}: {why}."))
            try:
                # httptools (pinned), with the limits on connections and heads (connections.py)
                config = uvicorn.Config(self._make_app(key, is_loopback(host)), lifespan="off", log_config=None, access_log=False,
                                        proxy_headers=False, server_header=False, ws="none",
                                        timeout_graceful_shutdown=GRACE_S, http=limited_protocol(self.limits),
                                        timeout_keep_alive=self.limits.keep_alive_s)
                config.load()
                server = uvicorn.Server(config)
                server.lifespan = config.lifespan_class(config)
                await server.startup(sockets=[sock])
                await anyio.sleep(0)  # anyio loads its asyncio backend on first use (~40 ms): now, not in a request
            except (Exception, SystemExit) as exc:  # noqa: BLE001 - shown as a state, logged with its traceback
                sock.close()
                log.exception("The API server could not start")
                return self._set(ApiStatus(ApiState.ERROR, host, port, f"The API server could not start: {exc}."))
            self._server, self._sock = server, sock
            self._stopping = asyncio.Event()
            self._ticker = asyncio.ensure_future(self._tick(server, self._stopping))
            status = self._set(ApiStatus(ApiState.LISTENING, host, sock.getsockname()[1]))
            log.info("Local API listening on %s", status.url)
            return status

    async def stop(self) -> ApiStatus:
        """Stop listening; running responses get a short grace, then are cancelled (which cancels
        their requests). Idempotent."""
        async with self._lock:
            await self._stop()
            return self.status

    async def _stop(self) -> None:
        server, sock, ticker = self._server, self._sock, self._ticker
        self._server = self._sock = self._ticker = None
        if server is not None:
            self._stopping.set()
            server.should_exit = True
            if ticker is not None:
                await ticker
            try:
                await server.shutdown(sockets=[sock] if sock is not None else None)
            except Exception:  # noqa: BLE001 - stopping must always end in OFF
                log.exception("The API server did not shut down cleanly")
            log.info("Local API stopped")
        if self.status.state is not ApiState.OFF:
            self._set(ApiStatus(ApiState.OFF))

    @staticmethod
    async def _tick(server: uvicorn.Server, stopping: asyncio.Event) -> None:
        """uvicorn's housekeeping (the Date header) once a second until stopped."""
        while not stopping.is_set():
            await server.on_tick(0)
            try:
                await asyncio.wait_for(stopping.wait(), 1.0)
            except asyncio.TimeoutError:
                pass

    def _set(self, status: ApiStatus) -> ApiStatus:
        self.status = status
        if status.state in (ApiState.PORT_IN_USE, ApiState.ERROR):
            log.warning("Local API: %s", status.message)
        for listener in list(self.listeners):
            try:
                listener(status)
            except Exception:  # noqa: BLE001 - a broken view must not stop the server
                log.exception("An API state listener failed")
        return status


def bind(host: str, port: int) -> socket.socket:
    """A listening-ready TCP socket on host:port (raises OSError: in use, bad address, no access)."""
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise OSError(errno.EADDRNOTAVAIL, f"unknown address {host!r} ({exc.strerror})") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        if hasattr(socket, "SO_REUSEADDR") and not hasattr(socket, "SO_EXCLUSIVEADDRUSE"):  # POSIX: TIME_WAIT only
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock
