"""The Call page: start or end a voice call, choose how turns pass (duplex, turn-taking,
push-to-talk), mute, pause, "Listen now", the camera (a video call); the phase, the microphone
level, the live transcript, the camera's preview and per-turn metrics. It drives a Qt-free Call
(call/call.py) that its owner starts for it."""

from __future__ import annotations

import time
from contextlib import suppress
from typing import Any, Awaitable, Callable

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSplitter, QVBoxLayout, QWidget

from desktop.call.call import Call, CallEvent
from desktop.call.state import CallMode, CallPhase
from desktop.errors import OmnideskError
from desktop.ui import shortcuts
from desktop.ui.call.camera_view import CameraPanel
from desktop.ui.call.controls import CallControls, Stage
from desktop.ui.call.indicator import PhaseIndicator
from desktop.ui.call.level import LevelMeter
from desktop.ui.call.metrics import MetricsModel, MetricsTable
from desktop.ui.call.notice import CallNotice
from desktop.ui.call.ptt import PushToTalk
from desktop.ui.call.transcript import TranscriptView, empty_hint
from desktop.ui.style import muted
from desktop.tasks import TaskSet

StartCall = Callable[[CallMode], Awaitable[Call]]
MicStatus = Callable[[], "str | None"]
SPEECH = (CallPhase.USER_SPEAKING, CallPhase.TRANSCRIBING)


class CallPage(QWidget):
    """`start_call(mode)` opens a started Call (or raises OmnideskError with a plain message);
    `mic_status()` is None when a microphone can be used, else why not (Start is then disabled
    with that reason beside it). `cameras` (optional: no camera button without it) has
    `camera_status()` (None or why no camera), `async open_camera()` (a started Camera, or
    OmnideskError) and `sees_images()`. `status(text)` goes to the status bar. Call `shutdown()`
    before the engine closes: it hangs up."""

    status = Signal(str)
    recording = Signal(str)  # from any thread: "● Recording", a warning (recording stopped) or "" (not recording)
    _event = Signal(object)  # (call, CallEvent) from the call's threads to this (Qt) thread
    saved = Signal(str)  # the title of the conversation the ended call was saved as (in Chat)

    def __init__(self, start_call: StartCall, mic_status: MicStatus, parent: QWidget | None = None, *,
                 cameras: Any = None, camera_fps: int = 15) -> None:  # fmt: skip
        super().__init__(parent)
        self.setObjectName("callPage")
        self._start_call, self._mic_status, self.cameras = start_call, mic_status, cameras
        self.call: Any = None  # a Call (or a test's fake) while one runs
        self.phase: CallPhase | None = None
        self.stage = Stage.IDLE
        self.tasks = TaskSet(report_errors=True)
        self.mic_problem: str | None = mic_status()
        self._told_no_mic = False  # the notice says why Ctrl+Enter started no call
        self._cancel_start = False
        self._began = 0.0
        self._saved_note = ""  # where the last call went in Chat, once it is saved

        self.indicator = PhaseIndicator()
        self.clock = QLabel()
        self.clock.setStyleSheet(f"color: {muted(self).name()};")
        self.rec_label = QLabel()
        self.rec_label.setObjectName("recordingIndicator")
        self.rec_label.setStyleSheet("color: #d93025; font-weight: 600;")
        self.rec_label.hide()
        self.meter = LevelMeter()
        self.meter.setMinimumWidth(90)
        self.meter.setMaximumWidth(220)
        self.controls = CallControls()
        self.notice = CallNotice()
        self.transcript = TranscriptView()
        self.metrics = MetricsModel(self)
        self.table = MetricsTable(self.metrics)
        self.ptt = PushToTalk(self._talk_target, self)
        self.camera = CameraPanel(camera_fps)
        self._camera_opening = False
        self.camera_problem: str | None = cameras.camera_status() if cameras is not None else None
        self._build()
        self._connect()
        self._tick = QTimer(self)
        self._tick.setInterval(1000)
        self._tick.timeout.connect(self._show_clock)
        self._sync()

    def _build(self) -> None:
        header = QHBoxLayout()
        header.setSpacing(12)
        header.addWidget(self.indicator)
        header.addWidget(self.clock)
        header.addWidget(self.rec_label)
        header.addStretch(1)
        self.meter_label = QLabel("Microphone")
        self.meter_label.setStyleSheet(f"color: {muted(self).name()};")
        header.addWidget(self.meter_label)
        header.addWidget(self.meter)
        metrics_box = QWidget()
        box = QVBoxLayout(metrics_box)
        box.setContentsMargins(0, 6, 0, 0)
        box.setSpacing(4)
        title = QLabel("Turn metrics")
        title.setObjectName("sectionTitle")
        box.addWidget(title)
        box.addWidget(self.table)
        self.table.setMinimumHeight(self.table.verticalHeader().defaultSectionSize() * 3 + 30)
        talk = QWidget()  # the transcript, and the camera's preview beside it while it is on
        row = QHBoxLayout(talk)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.transcript, 1)
        row.addWidget(self.camera)
        if self.cameras is not None:
            self.controls.add_button(self.camera.button)
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(talk)
        splitter.addWidget(metrics_box)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 1)
        splitter.setChildrenCollapsible(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(20, 16, 20, 16)
        layout.setSpacing(12)
        layout.addLayout(header)
        layout.addWidget(self.controls)
        layout.addWidget(self.notice)
        layout.addWidget(splitter, 1)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)

    def _connect(self) -> None:
        c = self.controls
        c.call_button.clicked.connect(self.toggle_call)
        c.mode.currentIndexChanged.connect(lambda _i: self._mode_changed())
        c.mode.activated.connect(lambda _i: self._mode_chosen())
        c.mute.toggled.connect(self._mute)
        c.pause.clicked.connect(self._pause_or_resume)
        c.listen.clicked.connect(lambda: self.call is not None and self.call.force_listen())
        c.talk.pressed.connect(self.ptt.press)
        c.talk.released.connect(self.ptt.release)
        self.camera.button.clicked.connect(self._camera_clicked)
        self._event.connect(self._on_event, Qt.ConnectionType.QueuedConnection)
        self.recording.connect(self._show_recording, Qt.ConnectionType.QueuedConnection)
        self.saved.connect(self._show_saved, Qt.ConnectionType.QueuedConnection)
        keys = {shortcuts.sequence("call"), QKeySequence(Qt.Modifier.CTRL | Qt.Key.Key_Return)}
        for seq in keys:  # Enter is Return and the keypad's Enter alike (see shortcuts.py)
            sc = QShortcut(seq, self, context=Qt.ShortcutContext.WidgetWithChildrenShortcut)
            sc.activated.connect(self.toggle_call)
        camera_key = QShortcut(shortcuts.sequence("camera"), self, context=Qt.ShortcutContext.WidgetWithChildrenShortcut)
        camera_key.activated.connect(lambda: self.camera.button.isEnabled() and self.camera.button.click())
        self.ptt.watch(w for w in self.findChildren(QWidget) if w.focusPolicy() != Qt.FocusPolicy.NoFocus)

    # ------------------------------------------------------------------ for the owner and tests

    @property
    def mode(self) -> CallMode:
        return self.controls.chosen_mode

    def set_mode(self, mode: CallMode) -> None:
        self.controls.select_mode(mode)

    def refresh_mic(self) -> None:
        """Ask again whether a microphone can be used (a device may have been plugged in)."""
        self.mic_problem = self._mic_status()
        if self.mic_problem is None and self._told_no_mic:
            self._told_no_mic = False
            self.notice.clear()
        if self.cameras is not None:
            self.camera_problem = self.cameras.camera_status()
        self._sync()

    def toggle_call(self) -> None:
        """Start/End (the button, Ctrl+Enter); while starting: cancel. Without a microphone,
        Ctrl+Enter says why nothing starts."""
        if self.stage is Stage.IDLE and self.mic_problem is not None:
            self.refresh_mic()  # plugged in since the page was shown?
            if self.mic_problem is not None:
                self.notice.show_info(f"Cannot start a call: {self.mic_problem.rstrip('.')}.")
                self._told_no_mic = True
                return
        if self.stage is Stage.IDLE:
            self.start()
        elif self.stage is Stage.STARTING:
            self._cancel_start = True
            self.stage = Stage.ENDING
            self._sync()
        elif self.stage is Stage.IN_CALL:
            self.end()

    def start(self) -> None:
        if self.stage is not Stage.IDLE or self.mic_problem is not None:
            return
        self.stage, self._cancel_start = Stage.STARTING, False  # now: a second click cannot start twice
        self._saved_note = ""
        self.notice.clear()
        self.transcript.log.clear()
        self.transcript.refresh()
        self.metrics.clear()
        self.indicator.set_phase(None)
        self.indicator.label.setText("Connecting…")
        self._sync()
        self.tasks.spawn(self._run_start(self.mode))

    def end(self) -> None:
        if self.stage is Stage.IN_CALL and self.call is not None:
            self.ptt.release()
            self.stage = Stage.ENDING
            self._sync()
            self.tasks.spawn(self._run_end(self.call))

    async def shutdown(self) -> None:
        """Hang up (if a call runs) and wait for the page's tasks."""
        if self.stage is Stage.STARTING:
            self._cancel_start = True
        self.end()
        await self.tasks.wait()

    # ------------------------------------------------------------------ the call's life

    async def _run_start(self, mode: CallMode) -> None:
        call = None
        try:
            call = await self._start_call(mode)
        except OmnideskError as exc:
            self.notice.show_error(exc.message)
            self.mic_problem = self._mic_status()
        finally:
            if call is None:
                self.stage = Stage.IDLE
                self.indicator.set_phase(None)
                self._sync()
        if call is None:
            return
        if self._cancel_start:
            await self._hang_up(call)
            self.stage = Stage.IDLE
            self.indicator.set_phase(None)
            self._sync()
            return
        self.call, self.stage = call, Stage.IN_CALL
        call.listeners.append(self._listener(call))
        if self.mode is not mode:  # changed while connecting
            call.set_mode(self.mode)
        self._began = time.monotonic()
        self._tick.start()
        self._show_clock()
        self._set_phase(call.phase)
        self.setFocus()  # Space and Ctrl+Enter reach the page
        self.status.emit("Call started")

    async def _run_end(self, call: Any) -> None:
        try:
            await self._hang_up(call)
        finally:
            self._finished(call, "user")

    async def _hang_up(self, call: Any) -> None:
        try:
            await call.end()
        except OmnideskError as exc:
            self.notice.show_error(f"The call did not end cleanly: {exc.message}")

    def _finished(self, call: Any, reason: str) -> None:
        """The call ended (hung up here, or by itself: idle timeout): back to idle."""
        if call is not self.call:
            return
        for listener in [x for x in call.listeners if getattr(x, "page", None) is self]:
            call.listeners.remove(listener)
        self.ptt.forget()
        self._close_camera(call)
        self.call, self.stage = None, Stage.IDLE
        self.rec_label.hide()
        self._tick.stop()
        self.meter.reset()
        self.transcript.log.drop_partial()
        self.transcript.refresh()
        self._set_phase(CallPhase.ENDED)
        if reason == "idle":
            minutes = getattr(getattr(call, "state", None), "idle_timeout_s", None)
            after = f"after {minutes / 60:.0f} minutes" if minutes and minutes >= 120 else "after a while"
            self.notice.show_info(f"The call ended: nobody spoke {after}.")
        self._tell_saved()
        self.status.emit("Call ended")

    def _show_saved(self, title: str) -> None:
        """The ended call is a conversation in Chat now (this may come before or after the page
        has seen the call end): say where, beside how it ended."""
        self._saved_note = f"It is in Chat as “{title}”: type there to go on."
        if self.stage is Stage.IDLE and self.call is None:
            self._tell_saved()
        self.status.emit(f"Call saved in Chat: {title}")

    def _tell_saved(self) -> None:
        shown = self.notice.text
        if self._saved_note and not self.notice.error and self._saved_note not in shown:
            self.notice.show_info(f"{shown or 'The call ended.'} {self._saved_note}")

    def _show_recording(self, text: str) -> None:
        """The recording sign beside the call's clock; a warning when recording had to stop."""
        if text.startswith("●") or not text:
            self.rec_label.setText(text)
            self.rec_label.setToolTip("This call is being recorded (Settings → Recording)." if text else "")
            self.rec_label.setVisible(bool(text))
            return
        self.rec_label.hide()
        self.notice.show_error(text)
        self.status.emit(text)

    def _listener(self, call: Any) -> Callable[[CallEvent], None]:
        def listen(event: CallEvent) -> None:  # the call's threads
            try:
                self._event.emit((call, event))
            except RuntimeError:  # the page is gone
                with suppress(ValueError):
                    call.listeners.remove(listen)

        listen.page = self  # type: ignore[attr-defined]
        return listen

    # ------------------------------------------------------------------ events (Qt thread)

    def _on_event(self, item: tuple[Any, CallEvent]) -> None:
        call, event = item
        if call is not self.call:
            return  # a call that has ended here already
        kind, log = event.kind, self.transcript.log
        if kind == "phase" and event.phase is not None:
            self._set_phase(event.phase)
        elif kind == "level":
            if self.phase is not CallPhase.PAUSED:  # the call ignores the microphone meanwhile
                self.meter.set_db(event.value)
        elif kind == "partial":
            if self.phase in SPEECH and event.text.strip():
                log.partial(event.text.strip())
                self.transcript.refresh()
        elif kind == "user":
            log.user(event.text)
            self.transcript.refresh()
        elif kind == "assistant":
            log.assistant(event.text)
            self.transcript.refresh()
        elif kind == "cut":
            log.cut(event.text)
            self.transcript.refresh()
        elif kind == "metrics" and event.metrics is not None:
            self.metrics.add(event.metrics)
        elif kind == "error":
            self.notice.show_error(event.text)
            self.status.emit(event.text)
        elif kind == "notice":
            self.notice.show_info(event.text)
        elif kind == "ended":
            self._finished(call, event.text)

    def _set_phase(self, phase: CallPhase) -> None:
        self.phase = phase
        self.indicator.set_phase(phase)
        if phase not in SPEECH and phase is not CallPhase.THINKING:
            self.transcript.log.drop_partial()  # an utterance with no words
            self.transcript.refresh()
        if phase in (CallPhase.PAUSED, CallPhase.ENDED):
            self.meter.set_db(-120.0)
        self._sync()

    def _sync(self) -> None:
        self.controls.show_state(self.stage, self.phase, self.mic_problem)
        self.meter.setEnabled(self.stage is Stage.IN_CALL)
        metered = not (self.stage is Stage.IDLE and self.mic_problem)  # no input: nothing to meter
        self.meter.setVisible(metered)
        self.meter_label.setVisible(metered)
        self.clock.setVisible(self.stage is Stage.IN_CALL)
        self.transcript.setPlaceholderText(empty_hint(self.stage is Stage.IN_CALL, self.mode, self.mic_problem))
        if self.cameras is not None:
            in_call = self.stage is Stage.IN_CALL
            self.camera.show_state(in_call and not self._camera_opening, self.camera_problem if in_call else None)

    def _show_clock(self) -> None:
        seconds = int(time.monotonic() - self._began)
        self.clock.setText(f"{seconds // 60}:{seconds % 60:02d}")

    # ------------------------------------------------------------------ buttons and keys

    def _mode_changed(self) -> None:
        if self.mode is not CallMode.PUSH_TO_TALK:
            self.ptt.release()
        if self.call is not None:
            self.call.set_mode(self.mode)
            self.status.emit(f"Mode: {self.controls.mode.currentText()}")
        self._sync()

    def _mode_chosen(self) -> None:
        """The user picked push-to-talk in the dropdown: the page takes the focus, so that Space
        talks at once (left in the dropdown, Space would open its list again)."""
        if self.mode is CallMode.PUSH_TO_TALK:
            self.setFocus(Qt.FocusReason.OtherFocusReason)

    def _mute(self, on: bool) -> None:
        if self.call is None:
            return
        self.ptt.release()
        self.call.set_muted(on)
        self.meter.set_muted(on)
        self.status.emit("Microphone muted" if on else "Microphone on")
        self._sync()

    def _pause_or_resume(self) -> None:
        if self.call is None:
            return
        if self.phase is CallPhase.PAUSED:
            self.call.resume()
        else:
            self.ptt.release()
            self.call.pause()

    # ------------------------------------------------------------------ the camera

    def _camera_clicked(self) -> None:
        if self.call is None or self.cameras is None:
            self.camera.show_off()
        elif self.camera.camera is None:
            self.camera.button.setChecked(False)  # checked once it delivers
            self._camera_opening = True
            self._sync()
            self.tasks.spawn(self._open_camera(self.call))
        else:
            self._close_camera(self.call)
            self.status.emit("Camera off")

    async def _open_camera(self, call: Any) -> None:
        try:
            camera = await self.cameras.open_camera()
        except OmnideskError as exc:
            self.notice.show_error(exc.message)
            return
        finally:
            self._camera_opening = False
            self._sync()
        if call is not self.call:  # the call ended meanwhile
            camera.close()
            return
        video = getattr(call, "video", None)
        sees = bool(self.cameras.sees_images())
        if video is not None:
            video.camera, video.send, video.on = camera, sees, True
        self.camera.show_camera(camera, sees, getattr(video, "rate_hz", 1.0))
        self.status.emit("Camera on")

    def _close_camera(self, call: Any) -> None:
        camera = self.camera.camera
        video = getattr(call, "video", None)
        if video is not None:
            video.on, video.camera = False, None
        self.camera.show_off()
        if camera is not None:
            camera.close()

    def _talk_target(self) -> Any:
        """The call Space talks to: only during a push-to-talk call."""
        in_ptt = self.stage is Stage.IN_CALL and self.mode is CallMode.PUSH_TO_TALK
        return self.call if in_ptt else None

    def showEvent(self, event: Any) -> None:
        if self.stage is Stage.IDLE:
            self.refresh_mic()
        else:
            self.setFocus()
        super().showEvent(event)
