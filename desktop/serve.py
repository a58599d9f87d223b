"""`omnidesk serve`: the engine (the settings' workers → a gateway), the local OpenAI-compatible
API and /metrics, without a window: for machines without a display and agents that run all day.
It says where it listens, then when the model is ready; SIGINT (Ctrl+C) or SIGTERM stops it
cleanly: the API stops accepting, running requests end, every worker gets its Shutdown (which
keeps what the KV cache keeps on disk) and is waited for, and the process exits 0. Qt-free: it
imports nothing of the window (tests/test_house_imports.py)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from typing import Callable, TextIO

from pydantic import ValidationError

from desktop.api.app import Engine
from desktop.api.metrics import live_from_snapshot
from desktop.api.model_ids import aliases
from desktop.api.server import ApiState
from desktop.api_control import ApiControl
from desktop.engine_hosts import engine_hosts, model_info
from desktop.errors import OmnideskError
from desktop.gateway.gateway import Gateway
from desktop.gateway.monitor import EngineMonitor
from desktop.protocol import WorkerHost, WorkerState, WorkerStatus
from desktop.settings import Settings

log = logging.getLogger(__name__)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
KEY_ENV = "OMNIDESK_API_KEY"  # a key given to `serve` without writing it into the settings or the command line


class SettingsError(ValueError):
    """An override that the settings' rules refuse; its message names the option."""


def serve_settings(settings: Settings, *, host: str | None = None, port: int | None = None,
                   model: str | None = None, device: str | None = None, dtype: str | None = None,
                   key: str | None = None) -> Settings:
    """The settings with the command line's overrides, checked by the same rules as the settings
    file (a host other computers can reach needs an API key); the API is on whatever they say."""
    changes = {name: value for name, value in (("api_host", host), ("api_port", port), ("model_source", model),
                                               ("device", device), ("dtype", dtype), ("api_key", key))
               if value is not None}
    data = {**settings.model_dump(), **changes, "api_server_enabled": True}
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(map(str, first.get("loc", ()))) or "settings"
        option = {"api_host": "--host", "api_port": "--port", "model_source": "--model", "device": "--device",
                  "dtype": "--dtype", "api_key": KEY_ENV}.get(field, field)
        raise SettingsError(f"{option}: {str(first.get('msg', 'is not valid')).removeprefix('Value error, ')}") from None


class HeadlessServer:
    """One run of the server: `run(stop)` until `stop` is set. `say` prints a line for the user;
    `hosts_for(settings)` builds the workers (engine_hosts; tests may pass their own)."""

    def __init__(self, settings: Settings, say: Callable[[str], None],
                 hosts_for: Callable[[Settings], list[WorkerHost]] = engine_hosts) -> None:
        self.settings, self._say, self._hosts_for = settings, say, hosts_for
        self.gateway: Gateway | None = None
        self.monitor = EngineMonitor()
        self.model_name: str | None = None
        self.supports_images = False
        self._loading = False
        self._stages: dict[str, str] = {}
        self.api = ApiControl(self._engine, lambda: self._loading, self._live)

    def _engine(self) -> Engine | None:
        if self.gateway is None or self.model_name is None:
            return None
        return Engine(self.gateway, self.model_name, self.supports_images, self.settings.sampling(),
                      aliases(self.settings.model_source))

    def _loading_stage(self, worker_id: str, event: object) -> None:
        """Each worker's loading stages, one line per stage (not per percent), while it loads."""
        if isinstance(event, WorkerStatus) and event.state is WorkerState.LOADING and event.message \
                and not event.message.startswith("Ready"):  # the Ready line below says it
            stage = event.message.rstrip("0123456789% ")
            if self._stages.get(worker_id) != stage:
                self._stages[worker_id] = stage
                self._say(f"  {worker_id}: {event.message}")

    def _live(self):  # noqa: ANN202 - the engine's gauges for /metrics (api.metrics.Live)
        return live_from_snapshot(self.monitor.snapshot(self.gateway)) if self.gateway is not None else None

    async def run(self, stop: asyncio.Event) -> int:
        """0 after a clean stop; 1 when the model could not be loaded; 2 when the API could not listen."""
        settings = self.settings
        try:
            hosts = self._hosts_for(settings)
        except OmnideskError as err:
            self._say(f"error: {err.message}")
            return 1
        gateway = self.gateway = Gateway(hosts)
        self.monitor.watch(gateway)
        gateway.event_observers.append(self._loading_stage)
        self.api.watch(gateway)
        self._loading = True
        status = await self.api.apply(settings)
        if status.state is not ApiState.LISTENING:
            self._say(f"error: {status.describe()}")
            await self.api.close()
            return 2
        code = 0
        try:
            keyed = " (API key required)" if settings.api_key else ""
            self._say(f"Listening on {status.url}{keyed}: OpenAI-compatible API at {status.url}/v1, metrics at "
                      f"{status.url}/metrics. Loading {settings.model_source} on {settings.device}…")
            await gateway.start()
            ready = asyncio.ensure_future(gateway.wait_ready())
            stopped = asyncio.ensure_future(stop.wait())
            await asyncio.wait({ready, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if not ready.done():  # stopped while loading
                ready.cancel()
            elif ready.result():
                self.model_name, self.supports_images = model_info([self.monitor.status(h.worker_id) for h in hosts],
                                                                   settings.model_spec())
                self._say(f"Ready: {self.model_name} on {len(hosts)} worker(s). Ctrl+C or SIGTERM stops the server.")
            else:
                errors = [s.message for h in hosts if (s := self.monitor.status(h.worker_id)) and s.message]
                self._say(f"error: the model could not be loaded: {errors[0] if errors else 'no worker could start.'}")
                code = 1
            self._loading = False
            if code == 0:
                await stopped
            stopped.cancel()
        finally:
            self._loading = False
            self._say("Stopping: no new requests; running ones end; the workers shut down…")
            await self.api.close()  # stop accepting; running responses get a short grace, then end
            await gateway.close()  # what is left ends ("shutdown"); every worker gets Shutdown and is waited for
            self.gateway = None
        self._say("Stopped.")
        return code


def main(settings: Settings, out: TextIO | None = None) -> int:
    """Run the server on this thread's new event loop until SIGINT or SIGTERM. A second signal
    while stopping quits at once (exit 130), without waiting for the workers."""
    out = out or sys.stdout

    def say(line: str) -> None:
        print(line, file=out, flush=True)
        log.info("serve: %s", line)

    async def go() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def on_signal(signum: int) -> None:
            if stop.is_set():
                say(f"{signal.Signals(signum).name} again: quitting without waiting for the workers.")
                os._exit(130)
            say(f"{signal.Signals(signum).name}: stopping…")
            stop.set()

        for signum in STOP_SIGNALS:
            try:
                loop.add_signal_handler(signum, on_signal, signum)
            except (NotImplementedError, RuntimeError):  # Windows: Python's own handler, onto the loop
                signal.signal(signum, lambda n, _frame: loop.call_soon_threadsafe(on_signal, n))
        return await HeadlessServer(settings, say).run(stop)

    return asyncio.run(go())


def leave(code: int) -> None:
    """End the process once the server has stopped cleanly (workers shut down and joined, the
    log flushed): at once, skipping the interpreter's teardown of torch and its modules, which
    took 6-13 s on a loaded 2-core machine after everything was already closed."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more to say
            pass
    os._exit(code)
