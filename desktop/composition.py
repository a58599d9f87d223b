"""Composition root: settings → workers → gateway → windows on the way up; windows → gateway →
hosts on the way down. Also applies new settings: live, or by rebuilding the engine with progress."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any, Coroutine

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QApplication, QDialog, QMessageBox, QWidget

from desktop.api.app import Engine
from desktop.api.metrics import live_from_snapshot
from desktop.api_control import ApiControl
from desktop.gateway.gateway import Gateway
from desktop.errors import OmnideskError
from desktop.gc_policy import settle_heap
from desktop.model.loader import ModelSpec
from desktop.settings import Settings, save_settings
from desktop.tasks import TaskSet
from desktop.ui.admin.monitor import EngineMonitor, Snapshot
from desktop.ui.main_window import MainWindow
from desktop.ui.placeholder import ComingSoonPage
from desktop.ui.theme import apply_theme
from desktop.workers.factory import make_hosts, remote_hosts
from desktop.workers.remote.roster import RemoteRoster
from desktop.protocol import WorkerHost, WorkerStatus

log = logging.getLogger(__name__)
RESTARTING = "Restarting the model with the new settings…"
STARTING = "Starting the model…"


class GatewayProxy:
    """Stands in for the current gateway, so that pages built once keep working across reloads."""

    def __init__(self) -> None:
        self.target: Gateway | None = None

    def __getattr__(self, name: str) -> Any:
        target = self.__dict__.get("target")
        if target is None:
            raise OmnideskError("The model is not running yet; try again in a moment.", code="not_ready",
                                retryable=True)
        return getattr(target, name)


class Composition(QObject):
    """Owns the settings, the engine (hosts + gateway + monitor) and the main window.
    `engine_state` reports "loading", "ready", "failed", "restarting" and "closed";
    `quit_requested` fires when the user closed the window (Ctrl+Q or the close button)."""

    engine_state = Signal(str)
    quit_requested = Signal()
    api_status = Signal(object)  # desktop.api.server.ApiStatus, each time the local API's state changes
    recording_status = Signal(str)  # from the recorder's threads (replay progress, clean-up) → the status bar

    def __init__(self, app: QApplication, settings: Settings, *, warning: str | None = None,
                 settings_path: Path | None = None) -> None:
        super().__init__()
        self.app, self.settings, self._warning, self._path = app, settings, warning, settings_path
        self.hosts: list[WorkerHost] = []
        self.gateway: Gateway | None = None
        self.monitor: EngineMonitor | None = None
        self.roster: RemoteRoster | None = None  # the engine's remote workers, changed live (_apply_remotes)
        self.proxy = GatewayProxy()
        self.model_name: str | None = None
        self.supports_images = False
        self.window: MainWindow | None = None
        self.chat_page: QWidget | None = None
        self.store: Any = None
        self.settings_dialog: QDialog | None = None
        self._settings_page: str | None = None  # the settings page last looked at (this run)
        self.voice: Any = None  # desktop.speech.voice.Voice, built with the chat page
        self.call_page: Any = None  # desktop.ui.call.page.CallPage
        self.recordings_page: QWidget | None = None  # desktop.ui.recordings.RecordingsPage
        self.recordings: Any = None  # desktop.recording.service.Recordings
        self._boot_task: asyncio.Task | None = None
        self._tasks = TaskSet()
        self._lock = asyncio.Lock()
        self._closed = False
        self.api = ApiControl(self._api_engine, self._loading, lambda: live_from_snapshot(self.snapshot()))
        self.api.server.listeners.append(self.api_status.emit)

    # ------------------------------------------------------------------ start

    def start(self) -> MainWindow:
        """Build and show the window and start loading the model as a task (never blocks)."""
        self.app.setQuitOnLastWindowClosed(False)  # quitting goes through quit_requested → shutdown()
        apply_theme(self.app, self.settings.theme)
        window = self.window = MainWindow(self.settings, self.snapshot, lambda rid: self.proxy.cancel(rid))
        window.settings_requested.connect(self.open_settings)
        window.closed.connect(self._window_closed)
        self.recordings = self._make_recordings()
        self.chat_page = self._make_chat_page()
        window.set_chat_page(self.chat_page)
        self.call_page = self._make_call_page()
        if self.call_page is not None:
            window.set_call_page(self.call_page)
        self.recordings_page = self._make_recordings_page()
        if self.recordings_page is not None:
            window.set_recordings_page(self.recordings_page)
            self.recordings_page.settings_page_requested.connect(self.open_settings)
        settle_heap()  # start-up is over: what it built lives as long as the window (see gc_policy)
        window.show()
        self._boot_task = self.spawn(self._boot())
        if self.settings.api_server_enabled:
            self.spawn(self.api.apply(self.settings))  # at once: it answers 503 until the model is up
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

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task:
        """Run a background task, keeping a strong reference until it ends."""
        return self._tasks.spawn(coro)

    def snapshot(self) -> Snapshot | None:
        if self.gateway is None or self.monitor is None:
            return None
        return self.monitor.snapshot(self.gateway)

    async def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait for the current (re)load to end; True when a model is up."""
        async def settled() -> None:
            while (task := self._boot_task) is not None:
                try:
                    await asyncio.shield(task)
                    return
                except asyncio.CancelledError:
                    if task is self._boot_task:  # not replaced by a reload: really cancelled
                        raise
        await asyncio.wait_for(settled(), timeout)
        return self.model_name is not None

    # ------------------------------------------------------------------ the engine

    async def _boot(self) -> None:
        settings, window = self.settings, self.window
        assert window is not None
        window.set_error(None)
        if window.phase is None:
            window.set_phase(STARTING)
        self.engine_state.emit("loading")
        try:
            spec = settings.model_spec()
            hosts = engine_hosts(settings)
        except OmnideskError as err:
            return self._failed(err.message)
        monitor = EngineMonitor()
        gateway = Gateway(monitor.wrap(hosts))
        self.api.watch(gateway)
        self.hosts, self.monitor, self.gateway, self.roster = hosts, monitor, gateway, RemoteRoster.of(hosts)
        self.proxy.target = gateway
        await gateway.start()
        window.set_phase(None)  # from here on the workers report their own progress
        if not await gateway.wait_ready():  # self.hosts from here: remote workers may change while it loads
            errors = [s.message for h in self.hosts if (s := monitor.status(h.worker_id)) and s.message]
            return self._failed(errors[0] if errors else "No worker could start.")
        self._show_model(spec)
        log.info("Model %s ready on %d worker(s)", self.model_name, len(self.hosts))
        self.engine_state.emit("ready")
        window.refresh()

    def _show_model(self, spec: ModelSpec) -> None:
        """The model's name and whether it sees images, as the first worker up reported them."""
        assert self.window is not None and self.monitor is not None
        self.model_name, images = model_info([self.monitor.status(h.worker_id) for h in self.hosts], spec)
        detail = f"{spec.source} · {spec.device} · {spec.dtype} · {len(self.hosts)} worker(s)"
        self.window.set_model(self.model_name, detail)
        if images != self.supports_images:
            self.supports_images = images
            if hasattr(self.chat_page, "set_supports_images"):
                self.chat_page.set_supports_images(images)  # type: ignore[union-attr]

    def _failed(self, message: str) -> None:
        log.error("The model could not be loaded: %s", message)
        if self.window is not None:
            self.window.set_phase(None)
            self.window.set_error(message)
        self.engine_state.emit("failed")

    def _api_engine(self) -> Engine | None:
        """What the local API serves with now: None until a model is up (it answers 503)."""
        if self.gateway is None or self.model_name is None:
            return None
        return Engine(self.gateway, self.model_name, self.supports_images, self.settings.sampling())

    def _loading(self) -> bool:
        return self._boot_task is not None and not self._boot_task.done()

    async def _stop_engine(self) -> None:
        """Hang up a call, detach the chat page from running replies, cancel a load, close the
        gateway (→ hosts)."""
        if self.call_page is not None:
            try:
                await asyncio.wait_for(self.call_page.shutdown(), 5.0)
            except asyncio.TimeoutError:
                log.warning("The call did not end in time")
        if hasattr(self.chat_page, "shutdown"):  # stops a running reply before its worker goes away
            try:
                await asyncio.wait_for(self.chat_page.shutdown(), 3.0)  # type: ignore[union-attr]
            except asyncio.TimeoutError:
                log.warning("The chat page did not stop its reply in time")
        if self._boot_task is not None and not self._boot_task.done():
            self._boot_task.cancel()
            await asyncio.gather(self._boot_task, return_exceptions=True)
        gateway, self.gateway, self.monitor = self.gateway, None, None
        if gateway is not None:
            await gateway.close()  # the proxy keeps it until here: late calls get "shutting down"
        self.proxy.target = None
        self.hosts, self.model_name, self.roster = [], None, None

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
            self._apply_voice(old, new)
            self._apply_call_mode(old, new)
            if not self._closed:
                await self.api.apply(new)  # live: never reloads the model
            if self._closed:
                return False
            if not old.needs_reload(new):
                if self.roster is not None and (self.model_name is not None or self._loading()):
                    await self._apply_remotes(new)  # live, when they changed: the model and its caches stay
                    return False
                if new.remote_workers == old.remote_workers:
                    return False
                # remote workers changed, but no engine is up to change (its model failed): rebuild
            assert self.window is not None
            self.window.set_phase(RESTARTING)  # until the new gateway is up (see _boot)
            self.engine_state.emit("restarting")
            await self._stop_engine()
            self.window.set_model(None)
            self._boot_task = self.spawn(self._boot())
            return True

    def _apply_call_mode(self, old: Settings, new: Settings) -> None:
        """A new "Start calls in" mode shows on the Call page at once, unless a call runs."""
        page = self.call_page
        if new.call_mode != old.call_mode and page is not None and getattr(page, "call", None) is None:
            from desktop.call.state import CallMode

            page.set_mode(CallMode(new.call_mode))

    async def _apply_remotes(self, new: Settings) -> None:
        """The running gateway follows the remote workers in `new`: a removed (or changed) server's
        worker leaves the pool and its host is closed, a new one joins and loads; the unchanged
        ones and the local workers are not touched, so every cached conversation stays."""
        gateway, monitor, roster = self.gateway, self.monitor, self.roster
        assert gateway is not None and monitor is not None and roster is not None and self.window is not None
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
        added = remote_hosts([spec for _, spec in change.add], ids=[wid for wid, _ in change.add])
        for host in added:
            gateway.add_host(monitor.wrap([host])[0])
        removed = {wid for wid, _ in change.remove}
        self.hosts = [h for h in self.hosts if h.worker_id not in removed] + added
        log.info("%s", change.summary())
        self.window.show_message(change.summary())
        if self.model_name is not None:
            self._show_model(new.model_spec())
            if added:  # again once they are up: one may be what serves the model shown
                self.spawn(self._show_model_when_ready(gateway, new.model_spec()))
        self.window.refresh()

    async def _show_model_when_ready(self, gateway: Gateway, spec: ModelSpec) -> None:
        await gateway.wait_ready()
        if self.gateway is gateway and self.model_name is not None:
            self._show_model(spec)

    def open_settings(self, page: str | None = None) -> None:
        """Ctrl+,: the settings dialog (non-blocking; a second call raises the open one), on `page`
        (a page title, e.g. "Recording") or else on the page last looked at in this run."""
        from desktop.ui.settings_dialog import SettingsDialog

        if self.settings_dialog is None:
            dialog = self.settings_dialog = SettingsDialog(self.settings, self.window, sound_devices=sound_devices(),
                                                           api_status=self.api.status, page=page or self._settings_page)
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

    # ------------------------------------------------------------------ pages

    def _make_chat_page(self) -> QWidget:
        try:
            from desktop.chat.conversations import ConversationStore
            from desktop.ui.chat.page import ChatPage

            from desktop.speech.voice import Voice

            self.store = self.store or ConversationStore.default()
            self.voice = Voice.create(self.settings)  # never raises: no sound device → audio off, said in the UI
            page = ChatPage(self.proxy, self.store, lambda: self.settings, supports_images=self.supports_images,
                            voice=self.voice)
        except Exception as exc:  # a broken chat page must not take the window down with it
            log.exception("The chat page could not be built")
            return ComingSoonPage("chat", "Chat is unavailable", f"The chat page could not be loaded: {exc}. "
                                  "The details are in the log file (Help → Open log folder).")
        if self.recordings is not None:
            page.reply_observers.append(self.recordings.chats.observe)
        page.conversation_changed.connect(self._conversation_changed)
        page.voice_toggled.connect(self._voice_toggled)
        return page

    def _make_call_page(self) -> QWidget | None:
        try:
            from desktop.call.factory import CallFactory
            from desktop.call.state import CallMode
            from desktop.ui.call.page import CallPage

            calls = CallFactory(self.proxy, lambda: self.voice, lambda: self.settings, recordings=self.recordings,
                                model=lambda: self.model_name, sees_images=lambda: self.supports_images,
                                store=self.store)
            page = CallPage(calls.start, calls.mic_status, cameras=calls, camera_fps=self.settings.camera_preview_fps)
            calls.on_recording = page.recording.emit  # a Qt signal: safe from the recorder's threads
            calls.on_saved = lambda conv: self._call_saved(page, conv)
            page.set_mode(CallMode(self.settings.call_mode))
            return page
        except Exception:  # the placeholder stays: calls are unavailable, chat goes on
            log.exception("The call page could not be built")
            return None

    def _call_saved(self, page: Any, conv: Any) -> None:
        """A call that ended is a conversation now: the chat list shows it, the Call page says so."""
        refresh = getattr(self.chat_page, "refresh_list", None)
        if refresh is not None:
            refresh()
        page.saved.emit(conv.title)

    def _make_recordings_page(self) -> QWidget | None:
        try:
            from desktop.recording.paths import default_root
            from desktop.ui.recordings import RecordingsPage

            recordings = self.recordings
            root = recordings.root if recordings is not None else default_root()
            return RecordingsPage(lambda: root, self._speaker,
                                  live=recordings.live if recordings is not None else lambda: ())
        except Exception:  # the placeholder stays; the rest of the app goes on
            log.exception("The recordings page could not be built")
            return None

    def _speaker(self) -> Any:
        """The app's speaker for the recordings viewer (None when there is no sound output)."""
        voice = self.voice
        return voice.sink if voice is not None and voice.available else None

    def _make_recordings(self) -> Any:
        """Recordings (calls, chats when on, replays, retention); None if they cannot work."""
        try:
            from desktop.recording.service import Recordings

            recordings = Recordings(lambda: self.settings, status=self.recording_status.emit,
                                    model=lambda: self.model_name, voice=lambda: self.voice)
        except Exception:  # no recordings: the rest of the app goes on
            log.exception("Recordings are unavailable")
            return None
        if self.window is not None:
            self.recording_status.connect(self.window.show_message)
        return recordings

    def _voice_toggled(self, on: bool) -> None:
        self.settings.voice_enabled = on
        self.save()

    def _apply_voice(self, old: Settings, new: Settings) -> None:
        page = self.chat_page
        if self.voice is None or not hasattr(page, "set_voice"):
            return
        if new.audio_output_device != old.audio_output_device:
            from desktop.speech.voice import Voice

            self.voice.close()
            self.voice = Voice.create(new)
            page.set_voice(self.voice)
        else:
            self.voice.update(new)  # volume now; engine and voice from the next reply
        page.set_voice_enabled(new.voice_enabled)

    def _conversation_changed(self, conv_id: str) -> None:
        self.settings.last_conversation_id = conv_id or None

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
        await self._stop_engine()
        if self.recordings is not None:  # the chat sessions' last lines; the call's closed when it ended
            await asyncio.to_thread(self.recordings.close)
        if self.voice is not None:
            if hasattr(self.chat_page, "set_voice"):
                self.chat_page.set_voice(None)
            self.voice.close()
        await self._tasks.cancel_all()
        if window is not None:
            window.deleteLater()
        self.engine_state.emit("closed")


def model_info(statuses: list[WorkerStatus | None], spec: ModelSpec) -> tuple[str, bool]:
    """(model name, supports images) as the first worker that is up reported them."""
    for status in statuses:
        if status is not None and status.model:
            return status.model, status.supports_images
    return spec.source, False


def engine_hosts(settings: Settings) -> list[WorkerHost]:
    """The workers for the settings' model, then the remote workers (servers). A real model never
    runs in the window's process: its imports, tokenizer parse and weight loading hold the GIL for
    40-200 ms at a time, and its objects
    would fill the heap that the Qt thread's garbage collector scans. Only the tiny test model, built
    in code in milliseconds, stays on a thread (tests start many of them). Raises OmnideskError."""
    spec = settings.model_spec()
    return make_hosts(spec, settings.worker_config(), settings.workers, cores=worker_cores(),
                      isolate=spec.source != "tiny") + remote_hosts(settings.remote_specs())


def worker_cores() -> int:
    """CPU threads for the model: all cores but one, which is left to the UI thread. On 2 cores,
    2 OpenMP threads next to a busy UI made decoding ~10× slower (bench/ui_latency.py)."""
    return max(1, (os.cpu_count() or 1) - 1)


def sound_devices() -> Any:
    """The microphones and speakers for the settings dialog, looked for afresh (a SoundDevices:
    Pulse's own names where there is a Pulse server; empty without PortAudio or devices)."""
    from desktop.media.device_list import list_sound_devices

    return list_sound_devices()
