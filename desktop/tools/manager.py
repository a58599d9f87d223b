"""The MCP servers the app talks to, run with the official SDK on a loop of their own (a thread):
`apply(configs)` starts the enabled servers and stops the others; each server's state (starting,
ready with its tools, failed: why) is kept and its change told to the listeners (on this loop's
thread); `call(name, arguments)` runs a tool from any event loop and always ends with a
ToolResult — a server that crashes, hangs past the timeout or returns an error gives a result
that says so, never an exception."""

from __future__ import annotations

import asyncio
import json
import logging
import tempfile
import threading
import time
from typing import Any, Callable

from desktop.tools.config import ServerConfig
from desktop.tools.results import FAILED, OFF, READY, STARTING, ServerState, ToolInfo, ToolResult, exposed_name, result_text

log = logging.getLogger(__name__)

Listener = Callable[[str], None]


class ToolManager:
    def __init__(self, *, start_timeout_s: float = 30.0, call_timeout_s: float = 60.0) -> None:
        self.start_timeout_s, self.call_timeout_s = start_timeout_s, call_timeout_s
        self.listeners: list[Listener] = []
        self._states: dict[str, ServerState] = {}
        self._configs: dict[str, ServerConfig] = {}
        self._runs: dict[str, tuple[asyncio.Task, asyncio.Event]] = {}
        self._clients: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ what the others read

    def states(self) -> dict[str, ServerState]:
        with self._lock:
            return dict(self._states)

    def state(self, name: str) -> ServerState:
        with self._lock:
            return self._states.get(name, ServerState(name))

    def tools(self) -> list[ToolInfo]:
        """The tools of the ready, enabled servers, in the servers' order."""
        with self._lock:
            return [t for name, cfg in self._configs.items() if cfg.enabled
                    for t in self._states.get(name, ServerState(name)).tools]

    def specs(self) -> list[dict[str, Any]]:
        return [t.spec() for t in self.tools()]

    # ------------------------------------------------------------------ starting and stopping

    def apply(self, configs: list[ServerConfig], *, wait: bool = True) -> None:
        """Run exactly the enabled servers of `configs` (a changed config restarts its server, a
        failed one is retried); `wait`: until the changes are made (servers may still be starting)."""
        if not configs and self._loop is None:
            return  # nothing to run: no thread
        loop = self._ensure_loop()
        future = asyncio.run_coroutine_threadsafe(self._apply(list(configs)), loop)
        if wait:
            future.result()

    def restart(self, name: str) -> None:
        """Start the server `name` again (a failed one, or one whose tools changed); returns at once."""
        cfg = self._configs.get(name)
        if cfg is not None and self._loop is not None:
            asyncio.run_coroutine_threadsafe(self._restart(cfg), self._loop)

    def close(self, timeout: float = 5.0) -> None:
        """Stop every server and the loop (idempotent)."""
        loop, self._loop = self._loop, None
        if loop is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self._apply([]), loop).result(timeout)
        except Exception:  # a server that will not stop: its process goes with the app
            log.warning("MCP servers did not all stop in %.0f s", timeout)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout)

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=self._loop.run_forever, name="omnidesk-mcp", daemon=True)
            self._thread.start()
        return self._loop

    async def _apply(self, configs: list[ServerConfig]) -> None:
        wanted = {c.name: c for c in configs}
        for name in list(self._runs):
            if (name not in wanted or not wanted[name].enabled or wanted[name] != self._configs.get(name)
                    or self.state(name).status == FAILED):  # applied again: a failed server is retried
                await self._stop(name)
        with self._lock:
            self._configs = wanted
            for name in list(self._states):
                if name not in wanted:
                    del self._states[name]
        for cfg in configs:
            if cfg.enabled and cfg.name not in self._runs:
                self._start(cfg)
            elif not cfg.enabled:
                self._set(ServerState(cfg.name, OFF))

    async def _restart(self, cfg: ServerConfig) -> None:
        await self._stop(cfg.name)
        if cfg.enabled:
            self._start(cfg)

    def _start(self, cfg: ServerConfig) -> None:
        stop = asyncio.Event()
        self._set(ServerState(cfg.name, STARTING))
        task = asyncio.get_running_loop().create_task(self._run(cfg, stop))
        self._runs[cfg.name] = (task, stop)

    async def _stop(self, name: str) -> None:
        task, stop = self._runs.pop(name, (None, None))
        self._clients.pop(name, None)
        if task is None:
            return
        stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), 5.0)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            task.cancel()
        except Exception:
            pass

    async def _run(self, cfg: ServerConfig, stop: asyncio.Event) -> None:
        """One server's life: connect, list its tools, stay until stopped (or it fails)."""
        errlog = tempfile.TemporaryFile("w+") if cfg.transport == "stdio" else None
        statuses: list[int] = []  # HTTP error statuses seen (the SDK's message leaves them out)
        me = asyncio.current_task()
        timer = asyncio.get_running_loop().call_later(self.start_timeout_s, lambda: self._timed_out(cfg.name, me))
        try:
            async with _client(cfg, errlog, statuses) as client:
                listed = await client.list_tools()
                timer.cancel()
                tools = self._named(cfg.name, listed.tools)
                self._clients[cfg.name] = client
                self._set(ServerState(cfg.name, READY, tools))
                await stop.wait()
        except asyncio.CancelledError:
            if self.state(cfg.name).status == STARTING:
                self._set(ServerState(cfg.name, FAILED, error=f"it did not answer within {self.start_timeout_s:.0f} s"))
        except BaseException as exc:  # noqa: BLE001 — any failure of a server is its state, said in words
            if not stop.is_set():
                why = _http_why(statuses[-1]) if statuses else _why(exc, errlog)
                self._set(ServerState(cfg.name, FAILED, error=why))
        finally:
            timer.cancel()
            self._clients.pop(cfg.name, None)
            if errlog is not None:
                errlog.close()
        if self.state(cfg.name).status == READY:  # its connection ended by itself
            self._set(ServerState(cfg.name, FAILED, error="the server closed the connection"))

    def _timed_out(self, name: str, task: asyncio.Task | None) -> None:
        if task is not None and self.state(name).status == STARTING:
            task.cancel()

    def _named(self, server: str, tools: list[Any]) -> tuple[ToolInfo, ...]:
        taken = {t.name for s, st in self.states().items() if s != server for t in st.tools}
        out = []
        for t in tools:
            name = exposed_name(server, t.name, taken)
            taken.add(name)
            out.append(ToolInfo(server, name, t.name, t.description or "", dict(t.input_schema or {})))
        return tuple(out)

    def _set(self, state: ServerState) -> None:
        with self._lock:
            if state.name not in self._configs:
                return
            self._states[state.name] = state
        for listener in list(self.listeners):
            try:
                listener(state.name)
            except Exception:
                log.exception("An MCP state listener failed")

    # ------------------------------------------------------------------ calling

    async def call(self, name: str, arguments: str, timeout_s: float | None = None) -> ToolResult:
        """Run the tool `name` (as the model sees it) with `arguments` (a JSON object's text), from
        any event loop; the outcome, good or bad, as a ToolResult."""
        loop = self._loop
        if loop is None:
            return ToolResult(f"The tool {name} is not available: no MCP server is running.", False)
        future = asyncio.run_coroutine_threadsafe(self._call(name, arguments, timeout_s or self.call_timeout_s), loop)
        return await asyncio.wrap_future(future)

    async def _call(self, name: str, arguments: str, timeout_s: float) -> ToolResult:
        started = time.monotonic()

        def done(text: str, ok: bool) -> ToolResult:
            return ToolResult(text, ok, time.monotonic() - started)

        tool = next((t for t in self.tools() if t.name == name), None)
        client = self._clients.get(tool.server) if tool is not None else None
        if tool is None or client is None:
            return done(f"The tool {name} is not available (its server is off or not ready).", False)
        try:
            args = json.loads(arguments or "{}")
        except ValueError:
            return done(f"The arguments for {name} are not valid JSON.", False)
        try:
            result = await asyncio.wait_for(client.call_tool(tool.original, args, read_timeout_seconds=timeout_s),
                                            timeout_s + 2.0)
        except asyncio.TimeoutError:
            return done(f"The tool {name} did not answer within {timeout_s:.0f} s.", False)
        except Exception as exc:  # noqa: BLE001 — said to the model and the user as a sentence
            text = _why(exc, None)
            if "timed out" in text:
                return done(f"The tool {name} did not answer within {timeout_s:.0f} s.", False)
            if "closed" in text.lower():  # the process died: the server is failed until restarted
                self._clients.pop(tool.server, None)
                self._set(ServerState(tool.server, FAILED, error="it stopped during a call"))
                run = self._runs.get(tool.server)
                if run is not None:
                    run[1].set()
                return done(f"The server {tool.server} stopped while running {name}.", False)
            return done(f"The tool {name} failed: {text}", False)
        text = result_text(result.content, result.structured_content)
        if result.is_error:
            return done(f"The tool {name} returned an error: {text or 'no details'}", False)
        return done(text, True)


def _client(cfg: ServerConfig, errlog: Any, statuses: list[int]) -> Any:
    """The SDK's Client for `cfg` (an async context manager); stdio servers write their stderr
    to `errlog`, HTTP error statuses are added to `statuses`."""
    from mcp import Client  # the SDK loads when a server starts, not with the app
    if cfg.transport == "stdio":
        from mcp.client.stdio import StdioServerParameters, stdio_client
        params = StdioServerParameters(command=cfg.command, args=list(cfg.args), env=dict(cfg.env) or None)
        return Client(stdio_client(params, errlog=errlog))
    import httpx2
    from mcp.client.streamable_http import streamable_http_client
    async def note(response: Any) -> None:
        if response.status_code >= 400:
            statuses.append(response.status_code)

    http = httpx2.AsyncClient(headers=dict(cfg.headers), timeout=httpx2.Timeout(30.0, read=300.0),
                              event_hooks={"response": [note]})
    return Client(streamable_http_client(cfg.url, http_client=http))


def _http_why(status: int) -> str:
    if status in (401, 403):
        return f"the server answered HTTP {status}: check its headers (a key or token is missing or wrong)"
    if status == 404:
        return "the server answered HTTP 404: check the URL (MCP endpoints often end in /mcp)"
    return f"the server answered HTTP {status}"


def _why(exc: BaseException, errlog: Any) -> str:
    """A failure in words: the innermost error of an exception group, and the server's last stderr line."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError):
        text = f"the command {exc.filename or ''} was not found".replace("  ", " ")
    elif isinstance(exc, PermissionError):
        text = f"the command {exc.filename or ''} may not be run (permission denied)"
    elif type(exc).__name__ in ("ConnectError", "ConnectTimeout"):
        text = "could not connect to it (is the server running, and is the URL right?)"
    else:
        text = str(exc) or type(exc).__name__
    if errlog is not None:
        try:
            errlog.seek(0)
            lines = [ln.strip() for ln in errlog.read()[-4000:].splitlines() if ln.strip()]
        except (OSError, ValueError):
            lines = []
        if lines:
            text += f" (it said: {lines[-1][:200]})"
    return text
