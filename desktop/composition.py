"""Composition root: settings → workers → gateway → windows on the way up; windows → gateway →
hosts on the way down. Also applies new settings: live, or by rebuilding the engine with progress.
Its parts are beside it: engine_runner.py (the engine it runs), pages.py (the pages it builds),
engine_proxy.py (the gateway proxy)."""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Coroutine

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QApplication, QDialog, QMessageBox, QWidget

from desktop.api.app import Engine
from desktop.api.metrics import live_from_snapshot
from desktop.api_control import ApiControl
from desktop.gateway.gateway import Gateway
from desktop.gc_policy import settle_heap
from desktop.protocol import WorkerHost
from desktop.settings import Settings, config_dir, save_settings
from desktop.gateway.monitor import EngineMonitor, Snapshot
from desktop.tasks import TaskSet
from desktop.tools.manager import ToolManager
from desktop.ui.main_window import MainWindow
from desktop.ui.theme import apply_theme
from desktop.engine_proxy import EngineProxy
from desktop.engine_runner import EngineRunner
from desktop.pages import Pages
from desktop.model_control import ModelControl
from desktop.engine_hosts import engine_hosts, readiness, worker_cores  # noqa: F401 - worker_cores: bench/api.py
from desktop.workers.factory import remote_hosts
from desktop.workers.kv_disk.files import SnapshotDir, kv_root
from desktop.workers.readiness_store import mark_seen
from desktop.workers.remote.roster import RemoteRoster

log = logging.getLogger(__name__)
RESTARTING = "Restarting the model with the new settings…"
UNLOADED = "No model is loaded: load one on the Models page (Ctrl+5)."


class Composition(QObject):
    """Owns the settings, the engine (EngineRunner: hosts + gateway + monitor), the pages (Pages)
    and the main window. `engine_state` reports "loading", "ready", "failed", "restarting" and
    "closed"; `quit_requested` fires when the user closed the window (Ctrl+Q or the close button)."""

    engine_state = Signal(str)
    quit_requested = Signal()
    api_status = Signal(object)  # desktop.api.server.ApiStatus, each time the local API's state changes
    recording_status = Signal(str)  # from the recorder's threads (replay progress, clean-up) → the status bar

    def __init__(self, app: QApplication, settings: Settings, *, warning: str | None = None,
                 settings_path: Path | None = None) -> None:
        super().__init__()
        self.app, self.settings, self._warning, self._path = app, settings, warning, settings_path
        self.window: MainWindow | None = None
        self.snapshots = SnapshotDir(kv_root())  # the KV snapshots on disk (written by the workers)
        self._chores = ThreadPoolExecutor(1, thread_name_prefix="kv-files")  # their deletions, off the UI thread
        self.settings_dialog: QDialog | None = None
        self.first_run_page: QDialog | None = None  # shown by start() on a first start or new hardware
        self._settings_page: str | None = None  # the settings page last looked at (this run)
        self._tasks = TaskSet()
        self._lock = asyncio.Lock()
        self._closed = False
        self.tools = ToolManager()  # the MCP servers of Settings → Tools, on a thread of their own
        self.tools.apply(settings.mcp_servers, wait=False)
        self.api = ApiControl(self._api_engine, self._loading, lambda: live_from_snapshot(self.snapshot()))
        self.api.server.listeners.append(self.api_status.emit)
        self.engine = EngineRunner(
            lambda: self.settings, lambda: self.window, hosts_for=engine_hosts,
            remote_hosts=lambda specs, ids: remote_hosts(specs, ids=ids),  # looked up at each call (tests swap it)
            on_state=self.engine_state.emit, on_gateway=self.api.watch,
            on_images=lambda images: self.pages.set_supports_images(images), spawn=self.spawn)
        self.pages = Pages(lambda: self.settings, self.engine.proxy, model=lambda: self.engine.model_name,
                           sees_images=lambda: self.engine.supports_images, recording_status=self.recording_status.emit,
                           save=self.save, open_settings=self.open_settings, tools=self.tools)
        self.models = ModelControl.create(  # the Models page's work: catalog, load/unload, idle unload, downloads
            lambda: self.settings, config_dir(), _embedded_gguf, apply=self.apply_settings, unload=self.unload_model,
            boot=self.engine.boot, loaded=lambda: self.engine.model_name, activity=self._activity,
            readiness=self._choices, say=self._say, spawn=self.spawn, save=self.save, wait_ready=self.wait_ready,
            failure=self._failure)
        self.engine_state.connect(self.models.engine_state)

    # ------------------------------------------------------------------ what the parts own

    @property
    def gateway(self) -> Gateway | None:
        return self.engine.gateway

    @property
    def monitor(self) -> EngineMonitor | None:
        return self.engine.monitor

    @property
    def hosts(self) -> list[WorkerHost]:
        return self.engine.hosts

    @property
    def roster(self) -> RemoteRoster | None:
        return self.engine.roster

    @property
    def proxy(self) -> EngineProxy:
        return self.engine.proxy

    @property
    def model_name(self) -> str | None:
        return self.engine.model_name

    @property
    def chat_page(self) -> QWidget | None:
        return self.pages.chat_page

    @property
    def call_page(self) -> Any:
        return self.pages.call_page

    @property
    def recordings_page(self) -> QWidget | None:
        return self.pages.recordings_page

    @property
    def recordings(self) -> Any:
        return self.pages.recordings

    @property
    def store(self) -> Any:
        return self.pages.store

    # ------------------------------------------------------------------ start

    def start(self) -> MainWindow:
        """Build and show the window and start loading the model as a task (never blocks)."""
        self.app.setQuitOnLastWindowClosed(False)  # quitting goes through quit_requested → shutdown()
        apply_theme(self.app, self.settings.theme)
        window = self.window = MainWindow(self.settings, self.snapshot, lambda rid: self.proxy.cancel(rid))
        window.settings_requested.connect(self.open_settings)
        window.closed.connect(self._window_closed)
        self.pages.store = self.pages.store or self._open_store()
        self.pages.build(window)
        if self.store is not None:  # snapshots of conversations deleted meanwhile (or by another app)
            self._off_thread(self.snapshots.collect, [c.id for c in self.store.list()])
        if self.recordings is not None:
            self.recording_status.connect(window.show_message)
        self._models_page(window)
        settle_heap()  # start-up is over: what it built lives as long as the window (see gc_policy)
        window.show()
        self.engine.boot()
        self._first_run(window)
        if self.settings.api_server_enabled:
            self.spawn(self.api.apply(self.settings))  # at once: it answers 503 until the model is up
        self.spawn(self.models.idle_loop())
        if self.recordings is not None:  # at start, then hourly (cancelled with the other tasks at shutdown)
            self.spawn(self.recordings.retention_loop())
            self.spawn(self.recordings.idle_chats_loop())
        presets = getattr(self.chat_page, "presets", None)
        notices = [n for n in (self._warning, getattr(self.store, "notice", None),  # files set aside
                               getattr(presets, "notice", None)) if n]
        if notices:
            box = QMessageBox(QMessageBox.Icon.Warning, "Some saved data was not valid", "\n\n".join(notices),
                              QMessageBox.StandardButton.Ok, window)
            box.setTextFormat(Qt.TextFormat.PlainText)  # file names and values are not markup
            box.finished.connect(box.deleteLater)
            box.open()  # not exec(): a nested loop inside a task breaks qasync
            self._warning = None
        return window

    def _models_page(self, window: MainWindow) -> None:
        """The Models page (its placeholder stays if it cannot be built)."""
        try:
            from desktop.ui.models_page import ModelsPage

            page = ModelsPage(self.settings, self.models.folder())
        except Exception:  # noqa: BLE001 - the rest of the window goes on
            log.exception("The Models page could not be built")
            return
        window.set_page("models", page)
        self.models.attach(page)

    def _say(self, text: str) -> None:
        if self.window is not None:
            self.window.show_message(text)

    def _failure(self) -> str:
        """Why the last load failed, as the workers said it."""
        snap = self.snapshot()
        return next((w.message for w in (snap.workers if snap else []) if w.state == "error" and w.message), "")

    def _activity(self) -> tuple[bool, int]:
        """(a request runs or waits, requests submitted so far) for the idle unload's tick."""
        snap = self.snapshot()
        if snap is None:
            return False, 0
        return snap.requests.running > 0 or bool(snap.queue), snap.requests.submitted

    def _choices(self) -> Any:
        """This machine's readiness choices for the Models page's "fits" column (None for the test models)."""
        if self.settings.model_source.startswith("tiny"):
            return None
        try:
            return readiness().choices
        except Exception:  # noqa: BLE001 - the column then says "?"
            log.exception("The readiness check failed")
            return None

    async def unload_model(self) -> None:
        """Stop the engine and free the model's memory (the Models page's Unload, or idle). The
        workers write their KV snapshots as on quit, so a conversation's cache comes back from disk."""
        async with self._lock:
            if self._closed:
                return
            await self._stop_engine()
            self.proxy.absent = UNLOADED
            if self.window is not None:
                self.window.set_model(None)
                self.window.refresh()
            self.engine_state.emit("unloaded")

    def _first_run(self, window: MainWindow) -> None:
        """The first-run page, on the first start and when the hardware changed (not for the
        built-in test models: they are no one's first start). The model loads behind it."""
        if self.settings.model_source.startswith("tiny"):
            return
        try:
            ready = readiness()
        except Exception:  # the page is a courtesy: the engine makes its own choices without it
            log.exception("The readiness check failed")
            return
        if not ready.show:
            return
        from desktop.ui.first_run import FirstRunPage

        page = self.first_run_page = FirstRunPage(ready.machine, ready.choices, window, changed=ready.changed)
        page.change_requested.connect(lambda: self.open_settings("Model"))
        page.finished.connect(lambda _result: mark_seen(config_dir()))  # where engine_hosts.readiness keeps it
        page.finished.connect(page.deleteLater)
        page.show()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task:
        """Run a background task, keeping a strong reference until it ends."""
        return self._tasks.spawn(coro)

    def _open_store(self) -> Any:
        """The saved conversations, whose deletion deletes their KV snapshots; None when the
        folder cannot be read (the chat page then says why)."""
        from desktop.chat.conversations import ConversationStore

        try:
            return ConversationStore.default(on_delete=self._forget_snapshots)
        except Exception:  # noqa: BLE001 - the chat page tries again and shows the error
            log.exception("The conversations could not be loaded")
            return None

    def _forget_snapshots(self, conv_id: str) -> None:
        """A conversation was deleted: its KV snapshots go too (files: off the UI thread)."""
        self._off_thread(self.snapshots.delete_conversation, conv_id)

    def _off_thread(self, work: Any, *args: Any) -> None:
        """Run a blocking file chore off the UI thread, one after the other (in order)."""
        def run() -> None:
            try:
                work(*args)
            except Exception:  # noqa: BLE001 - a chore that fails leaves files for the next start
                log.exception("A KV snapshot chore failed")

        self._chores.submit(run)

    def snapshot(self) -> Snapshot | None:
        return self.engine.snapshot()

    async def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait for the current (re)load to end; True when a model is up."""
        return await self.engine.wait_ready(timeout)

    def _api_engine(self) -> Engine | None:
        """What the local API serves with now: None until a model is up (it answers 503)."""
        return self.engine.api_engine()

    def _loading(self) -> bool:
        return self.engine.loading()

    async def _stop_engine(self) -> None:
        """Hang up a call, detach the chat page from running replies, cancel a load, close the
        gateway (→ hosts)."""
        await self.pages.stop_turns()
        await self.engine.stop()

    # ------------------------------------------------------------------ settings

    async def apply_settings(self, new: Settings) -> bool:
        """Save and apply new settings; the engine is rebuilt (with progress) when needed.
        Returns True when it was. Sampling and the like apply at once: the chat reads self.settings;
        remote workers join or leave the running gateway."""
        async with self._lock:
            old = self.settings
            self.settings = new
            self.save()
            if new.theme != old.theme:
                apply_theme(self.app, new.theme)
            self.pages.apply(old, new)
            if new.mcp_servers != old.mcp_servers:
                self.tools.apply(new.mcp_servers, wait=False)  # started or stopped off this thread
            if not self._closed:
                await self.api.apply(new)  # live: never reloads the model
            if self._closed:
                return False
            if not old.needs_reload(new):
                if self.roster is not None and (self.model_name is not None or self._loading()):
                    await self.engine.apply_remotes(new)  # live, when they changed: the model and its caches stay
                    return False
                if new.remote_workers == old.remote_workers:
                    return False
                # remote workers changed, but no engine is up to change (its model failed): rebuild
            assert self.window is not None
            self.window.set_phase(RESTARTING)  # until the new gateway is up (see EngineRunner._boot)
            self.engine_state.emit("restarting")
            await self._stop_engine()
            self.window.set_model(None)
            self.engine.boot()
            return True

    def open_settings(self, page: str | None = None) -> None:
        """Ctrl+,: the settings dialog (non-blocking; a second call raises the open one), on `page`
        (a page title, e.g. "Recording") or else on the page last looked at in this run."""
        from desktop.ui.settings_dialog import SettingsDialog

        if self.settings_dialog is None:
            dialog = self.settings_dialog = SettingsDialog(self.settings, self.window, sound_devices=sound_devices(),
                                                           api_status=self.api.status, page=page or self._settings_page,
                                                           snapshots=self.snapshots, tools=self.tools)
            dialog.applied.connect(lambda new: self.spawn(self.apply_settings(new)))
            self.api_status.connect(dialog.show_api_status)
            dialog.finished.connect(self._settings_closed)
            dialog.open()
        elif page:
            self.settings_dialog.show_page(page)
        self.settings_dialog.raise_()
        self.settings_dialog.activateWindow()

    def _settings_closed(self) -> None:
        if self.settings_dialog is not None:
            self._settings_page = self.settings_dialog.current_page()
            self.api_status.disconnect(self.settings_dialog.show_api_status)
            self.settings_dialog.deleteLater()
        self.settings_dialog = None

    def save(self) -> None:
        try:
            save_settings(self.settings, self._path)
        except OSError as exc:
            log.error("Could not save the settings: %s", exc)
            if self.window is not None:
                self.window.show_message(f"Could not save the settings: {exc}")

    # ------------------------------------------------------------------ shutdown

    def _window_closed(self) -> None:
        if self.window is not None:
            state = {k: v for k, v in self.window.saved_state().items() if k in Settings.model_fields}
            if self.call_page is not None:
                state["call_mode"] = self.call_page.mode.value
            for key, value in state.items():
                setattr(self.settings, key, value)
            self.save()
        self.quit_requested.emit()

    async def shutdown(self) -> None:
        """Windows first (state saved), then the gateway, which closes the hosts. Idempotent."""
        if self._closed:
            return
        self._closed = True
        window = self.window
        if window is not None:
            for dialog in window.findChildren(QDialog):
                dialog.close()
            if window.isVisible():
                window.close()
        await self.api.close()  # API clients get their answers cut before the engine goes
        self.models.downloads.close()  # a download under way resumes at the next start
        await self._stop_engine()
        await self.pages.close()  # the recordings' last lines, then the voice
        await self._tasks.cancel_all()
        await asyncio.get_running_loop().run_in_executor(None, self.tools.close)  # the MCP servers' processes
        self._chores.shutdown(wait=False)  # a deletion under way finishes on its own; the rest at the next start
        if window is not None:
            window.deleteLater()
        self.engine_state.emit("closed")


def _embedded_gguf() -> Path | None:
    from desktop.errors import ModelLoadError
    from desktop.model.default_model import embedded_default_gguf

    try:
        return embedded_default_gguf()
    except ModelLoadError:
        return None


def sound_devices() -> Any:
    """The microphones and speakers for the settings dialog, looked for afresh (a SoundDevices:
    Pulse's own names where there is a Pulse server; empty without PortAudio or devices)."""
    from desktop.media.device_list import list_sound_devices

    return list_sound_devices()
