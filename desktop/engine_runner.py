"""The engine the app runs (part of the composition root): the settings' workers → a gateway
with its monitor, loaded as a task with progress on the window, stopped before a rebuild, and
remote workers joining or leaving the running gateway live."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Coroutine, Sequence

from desktop.api.app import Engine
from desktop.api.model_ids import aliases
from desktop.errors import OmnideskError
from desktop.gateway.gateway import Gateway
from desktop.model.loader import ModelSpec
from desktop.protocol import WorkerHost
from desktop.settings import Settings
from desktop.gateway.monitor import EngineMonitor, Snapshot
from desktop.ui.main_window import MainWindow
from desktop.engine_proxy import EngineProxy
from desktop.engine_hosts import model_info
from desktop.workers.remote.roster import RemoteRoster

log = logging.getLogger(__name__)
STARTING = "Starting the model…"

HostsFor = Callable[[Settings], list[WorkerHost]]  # the workers for the settings (raises OmnideskError)
RemoteHosts = Callable[[Sequence[Any], list[str]], list[WorkerHost]]  # (specs, worker ids) → remote workers


class EngineRunner:
    """Owns the engine of the moment: `hosts`, `gateway`, `monitor`, `roster` (None while none
    runs), the `proxy` that pages hold across reloads, and the model as the first worker up
    reported it (`model_name`, None until one is up; `supports_images`).

    Collaborators: `settings()` and `window()` (None before it is built) are read when needed;
    `hosts_for(settings)` and `remote_hosts(specs, ids)` build workers; `on_state` hears
    "loading", "ready" and "failed"; `on_gateway` each new gateway (before it starts);
    `on_images` when whether the model sees images changed; `spawn` runs background tasks."""

    def __init__(self, settings: Callable[[], Settings], window: Callable[[], MainWindow | None], *,
                 hosts_for: HostsFor, remote_hosts: RemoteHosts, on_state: Callable[[str], None],
                 on_gateway: Callable[[Gateway], None], on_images: Callable[[bool], None],
                 spawn: Callable[[Coroutine[Any, Any, Any]], asyncio.Task]) -> None:
        self._settings, self._window = settings, window
        self._hosts_for, self._remote_hosts = hosts_for, remote_hosts
        self._on_state, self._on_gateway, self._on_images, self._spawn = on_state, on_gateway, on_images, spawn
        self.hosts: list[WorkerHost] = []
        self.gateway: Gateway | None = None
        self.monitor: EngineMonitor | None = None
        self.roster: RemoteRoster | None = None  # the engine's remote workers, changed live (apply_remotes)
        self.proxy = EngineProxy()
        self.model_name: str | None = None
        self.supports_images = False
        self.boot_task: asyncio.Task | None = None

    # ------------------------------------------------------------------ reads

    def snapshot(self) -> Snapshot | None:
        if self.gateway is None or self.monitor is None:
            return None
        return self.monitor.snapshot(self.gateway)

    def loading(self) -> bool:
        return self.boot_task is not None and not self.boot_task.done()

    def api_engine(self) -> Engine | None:
        """What the local API serves with now: None until a model is up (it answers 503)."""
        if self.gateway is None or self.model_name is None:
            return None
        settings = self._settings()
        return Engine(self.gateway, self.model_name, self.supports_images, settings.sampling(),
                      aliases(settings.model_source))

    async def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait for the current (re)load to end; True when a model is up."""
        async def settled() -> None:
            while (task := self.boot_task) is not None:
                try:
                    await asyncio.shield(task)
                    return
                except asyncio.CancelledError:
                    if task is self.boot_task:  # not replaced by a reload: really cancelled
                        raise
        await asyncio.wait_for(settled(), timeout)
        return self.model_name is not None

    # ------------------------------------------------------------------ life

    def boot(self) -> asyncio.Task:
        """Build and load the engine for the current settings, as a task (never blocks)."""
        self.proxy.absent = EngineProxy.NOT_YET
        self.boot_task = self._spawn(self._boot())
        return self.boot_task

    async def _boot(self) -> None:
        settings, window = self._settings(), self._window()
        assert window is not None
        window.set_error(None)
        if window.phase is None:
            window.set_phase(STARTING)
        self._on_state("loading")
        try:
            spec = settings.model_spec()
            hosts = self._hosts_for(settings)
        except OmnideskError as err:
            return self._failed(err.message)
        monitor = EngineMonitor()
        gateway = Gateway(hosts)
        monitor.watch(gateway)
        self._on_gateway(gateway)
        self.hosts, self.monitor, self.gateway, self.roster = hosts, monitor, gateway, RemoteRoster.of(hosts)
        self.proxy.target = gateway
        await gateway.start()
        window.set_phase(None)  # from here on the workers report their own progress
        if not await gateway.wait_ready():  # self.hosts from here: remote workers may change while it loads
            errors = [s.message for h in self.hosts if (s := monitor.status(h.worker_id)) and s.message]
            return self._failed(errors[0] if errors else "No worker could start.")
        self._show_model(spec)
        log.info("Model %s ready on %d worker(s)", self.model_name, len(self.hosts))
        self._on_state("ready")
        window.refresh()
        fell = [h.worker_id for h in self.hosts if getattr(h, "fell_back", False)]  # a GPU that could not load it
        if fell and (status := monitor.status(fell[0])) is not None and status.message:
            window.show_message(status.message)

    def _show_model(self, spec: ModelSpec) -> None:
        """The model's name and whether it sees images, as the first worker up reported them."""
        window = self._window()
        assert window is not None and self.monitor is not None
        self.model_name, images = model_info([self.monitor.status(h.worker_id) for h in self.hosts], spec)
        detail = f"{spec.source} · {spec.device} · {spec.dtype} · {len(self.hosts)} worker(s)"
        window.set_model(self.model_name, detail)
        if images != self.supports_images:
            self.supports_images = images
            self._on_images(images)

    def _failed(self, message: str) -> None:
        log.error("The model could not be loaded: %s", message)
        window = self._window()
        if window is not None:
            window.set_phase(None)
            window.set_error(message)
        self._on_state("failed")

    async def stop(self) -> None:
        """Cancel a load and close the gateway (→ hosts); the proxy refuses from then on."""
        if self.boot_task is not None and not self.boot_task.done():
            self.boot_task.cancel()
            await asyncio.gather(self.boot_task, return_exceptions=True)
        gateway, self.gateway, self.monitor = self.gateway, None, None
        if gateway is not None:
            await gateway.close()  # the proxy keeps it until here: late calls get "shutting down"
        self.proxy.target = None
        self.hosts, self.model_name, self.roster = [], None, None

    # ------------------------------------------------------------------ remote workers, live

    async def apply_remotes(self, new: Settings) -> None:
        """The running gateway follows the remote workers in `new`: a removed (or changed) server's
        worker leaves the pool and its host is closed, a new one joins and loads; the unchanged
        ones and the local workers are not touched, so every cached conversation stays."""
        gateway, monitor, roster, window = self.gateway, self.monitor, self.roster, self._window()
        assert gateway is not None and monitor is not None and roster is not None and window is not None
        change = roster.change(new.remote_specs())
        if not change:
            return
        for worker_id, _spec in change.remove:
            if self.gateway is not gateway:  # the engine was stopped meanwhile (shutdown)
                return
            await gateway.remove_host(worker_id)
            monitor.forget(worker_id)
        if self.gateway is not gateway:
            return
        added = self._remote_hosts([spec for _, spec in change.add], [wid for wid, _ in change.add])
        for host in added:
            gateway.add_host(host)
        removed = {wid for wid, _ in change.remove}
        self.hosts = [h for h in self.hosts if h.worker_id not in removed] + added
        log.info("%s", change.summary())
        window.show_message(change.summary())
        if self.model_name is not None:
            self._show_model(new.model_spec())
            if added:  # again once they are up: one may be what serves the model shown
                self._spawn(self._show_model_when_ready(gateway, new.model_spec()))
        window.refresh()

    async def _show_model_when_ready(self, gateway: Gateway, spec: ModelSpec) -> None:
        await gateway.wait_ready()
        if self.gateway is gateway and self.model_name is not None:
            self._show_model(spec)
