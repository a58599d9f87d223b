"""The recording viewer: transcript, turn lane, both voices as waveforms, the camera's film strip
and the current frame, all following one play position; Space, ←/→ (5 s), Home/End, Esc."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable

from PySide6.QtCore import Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QColor, QDesktopServices, QKeySequence, QPalette, QShortcut
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QSplitter, QVBoxLayout, QWidget

from desktop.media.audio_out import AudioSink
from desktop.media.clock import Clock
from desktop.recording.library import live_names
from desktop.recording.mix import Mix
from desktop.recording.player import Player
from desktop.recording.reader import Recording, inside
from desktop.ui.plain import plain
from desktop.ui.shortcuts import sequence
from desktop.ui.recordings.filmstrip import FilmStrip
from desktop.ui.recordings.frame_view import FrameView
from desktop.ui.recordings.format import clock_text, date_text, kind_text
from desktop.ui.recordings.lanes import ZOOM_STEP, RulerLane, TimeLane, TurnLane, WaveformLane
from desktop.ui.recordings.transcript import TranscriptView
from desktop.ui.recordings.transport import Transport

TICK_MS = 30
MIN_VIEW_S = 2.0  # the most the timeline zooms in: 2 s across
SEEK_STEP_S = 5.0
MIN_TEXT_PLAY_S = 1.0  # a recording without sound shorter than this reads 0:00: nothing to play
PEAKS_PER_S = 100
USER_COLOR, AI_COLOR = QColor("#2f7d4f"), QColor("#3a6fd8")


class Viewer(QWidget):
    """`show_recording(rec)` loads one; `back` asks for the list again. The player's clock and the
    speaker are passed in (tests: a VirtualClock and the fake speaker; `speaker()` None: silent);
    `live()`: the folders being recorded now (an unfinished one not among them was cut short)."""

    back = Signal()
    status = Signal(str)

    def __init__(self, speaker: Callable[[], AudioSink | None] = lambda: None, clock: Clock | None = None,
                 live: Callable[[], Iterable[Path]] = lambda: (), parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._speaker, self._clock, self._live = speaker, clock, live
        self.live = False  # the recording shown is being recorded now
        self.playable = False  # it has something to play
        self.recording: Recording | None = None
        self.player = Player(0.0, clock=clock)
        self.timer = QTimer(self)
        self.timer.setInterval(TICK_MS)
        self.timer.timeout.connect(self.tick)

        back = QPushButton("‹ Recordings")
        back.setToolTip("Back to the list (Esc)")
        back.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        back.clicked.connect(self.close_recording)
        self.title = plain(QLabel())  # type: ignore[assignment]
        font = self.title.font()
        font.setPointSizeF(font.pointSizeF() * 1.25)
        font.setBold(True)
        self.title.setFont(font)
        self.info = QLabel()
        self.info.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.notice = QLabel()
        self.notice.setWordWrap(True)
        self.notice.setStyleSheet("color: #c07000;")  # amber: readable on light and dark
        self.notice.hide()
        head = QHBoxLayout()
        head.addWidget(back)
        head.addSpacing(8)
        head.addWidget(self.title)
        head.addSpacing(8)
        head.addWidget(self.info, 1)
        self.replay_button = QPushButton("Open video file")
        self.replay_button.setToolTip("The call's camera and both voices as one video (replay.mp4), in your video player")
        self.replay_button.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.replay_button.clicked.connect(self.open_replay)
        self.replay_button.hide()
        head.addWidget(self.replay_button)

        self.transcript = TranscriptView()
        self.transcript.seek.connect(self.seek)
        self.frame = FrameView()
        self.split = QSplitter(Qt.Orientation.Horizontal)
        self.split.addWidget(self.transcript)
        self.split.addWidget(self.frame)
        self.split.setStretchFactor(0, 3)
        self.split.setStretchFactor(1, 2)

        self.turn_lane = TurnLane()
        self.user_lane = WaveformLane("You", USER_COLOR)
        self.ai_lane = WaveformLane("Assistant", AI_COLOR)
        self.film = FilmStrip()
        self.ruler = RulerLane()
        self.lanes: list[TimeLane] = [self.ruler, self.turn_lane, self.user_lane, self.ai_lane, self.film]
        for lane in self.lanes:
            lane.seek.connect(self.seek)
            lane.zoom.connect(self.zoom_at)
            lane.scroll.connect(self.scroll_by)
        self.transport = Transport()
        self.transport.toggled.connect(self.toggle)
        self.transport.seek.connect(self.seek)
        self.transport.speed_changed.connect(self.set_speed)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 10, 12, 8)
        layout.setSpacing(6)
        layout.addLayout(head)
        layout.addWidget(self.notice)
        layout.addWidget(self.split, 1)
        for lane in self.lanes:
            layout.addWidget(lane)
        layout.addWidget(self.transport)

        keys = {"play": self.toggle, "seek_back": lambda: self.step(-SEEK_STEP_S),
                "seek_forward": lambda: self.step(SEEK_STEP_S), "seek_start": lambda: self.seek(0.0),
                "seek_end": lambda: self.seek(self.player.duration), "back_to_list": self.close_recording,
                "zoom_in": lambda: self.zoom_at(ZOOM_STEP), "zoom_out": lambda: self.zoom_at(1 / ZOOM_STEP)}
        self.shortcuts = {action: QShortcut(sequence(action), self, fn, context=Qt.ShortcutContext.WidgetWithChildrenShortcut)
                          for action, fn in keys.items()}
        self.shortcuts["zoom_in_alias"] = QShortcut(QKeySequence("="), self, keys["zoom_in"],  # + without Shift
                                                    context=Qt.ShortcutContext.WidgetWithChildrenShortcut)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)

    # ------------------------------------------------------------------ loading

    def show_recording(self, rec: Recording) -> None:
        """Show a recording (its tracks' peaks are computed here if the loader did not)."""
        self.player.close()
        self.recording = rec
        duration = rec.duration
        audio = not (rec.user.empty and rec.ai.empty)
        mix = Mix([rec.user, rec.ai]) if audio else None
        self.player = Player(duration, mix, self._speaker() if audio else None, clock=self._clock)
        self.player.on_state = self._state_changed
        self.title.setText(rec.title or f"{kind_text(rec.kind, bool(rec.meta.get('video')))} on {date_text(rec.started_at)}")
        info = [kind_text(rec.kind, bool(rec.frames)), date_text(rec.started_at), clock_text(duration)]
        if rec.turns:
            info.append(f"{len(rec.turns)} turn{'s' if len(rec.turns) != 1 else ''}")
        if rec.barge_ins:
            info.append(f"{len(rec.barge_ins)} barge-in{'s' if len(rec.barge_ins) != 1 else ''}")
        if rec.meta.get("model"):
            info.append(str(rec.meta["model"]))
        self.info.setText("  ·  ".join(info))
        warnings = []
        live = self.live = not rec.complete and rec.folder.name in live_names(self._live())
        problems = [p for p in rec.problems if not (live and p.startswith("the last timeline entry"))]  # being written
        if live:
            warnings.append("This recording is still going on; what was recorded so far is shown "
                            "(open it again to see what has been added since).")
        elif not rec.complete:
            warnings.append("This recording did not end normally (the app stopped during it); "
                            "everything written until then is shown.")
        if problems:
            warnings.append(f"Some parts could not be read: {'; '.join(problems[:3])}"
                            + (" …" if len(problems) > 3 else ""))
        warnings += [f"Note: {n}" for n in rec.notes if n]
        self.notice.setText("\n".join(warnings))
        self.notice.setVisible(bool(warnings))
        self.transcript.set_turns(rec.turns)
        for lane in self.lanes:
            lane.set_duration(duration)
            lane.marks = rec.barge_ins if lane is not self.ruler else []
        self.turn_lane.set_turns(rec.turns)
        self.turn_lane.setFixedHeight(34 if audio else 56)
        for lane, track in ((self.user_lane, rec.user), (self.ai_lane, rec.ai)):
            lane.set_peaks(*track.peaks(PEAKS_PER_S), PEAKS_PER_S)
            lane.setVisible(audio)
        self.replay_button.setVisible(self.replay_file() is not None)
        self.film.set_frames(rec.frames)
        self.film.setVisible(bool(rec.frames))
        self.frame.setVisible(bool(rec.frames))
        self.frame.reset()
        self.transport.set_duration(duration)
        # a text-only recording under a second ("0:00") has nothing to step through either
        self.playable = self.player.playable and (audio or duration >= MIN_TEXT_PLAY_S)
        self.transport.set_playable(self.playable, self.nothing_to_play())
        self.transport.set_speed(1.0)
        self._state_changed(False)
        self._show_position(0.0)
        self.setFocus()

    def replay_file(self) -> Path | None:
        """The recorder's replay video of this recording, once it has been built."""
        rec = self.recording
        replay = rec.meta.get("replay") if rec is not None else None
        path = inside(rec.folder, replay.get("video")) if rec is not None and isinstance(replay, dict) else None
        return path if path is not None and path.is_file() else None

    def open_replay(self) -> None:
        path = self.replay_file()
        if path is None:
            return
        self.player.pause()
        if not QDesktopServices.openUrl(QUrl.fromLocalFile(str(path))):
            self.status.emit(f"No video player could open {path}")

    def close_recording(self) -> None:
        self.player.close()
        self.back.emit()

    # ------------------------------------------------------------------ transport

    def nothing_to_play(self) -> str:
        """Why Play is off (the recording has no length yet), or "" when it can play."""
        if self.playable:
            return ""
        return "Nothing recorded to play yet" if self.live else "Nothing to play in this recording"

    def toggle(self) -> None:
        if self.recording is None:
            return
        if not self.playable:
            self.status.emit(f"{self.nothing_to_play()}.")
            return
        if not self.player.playing and self.player.mix is not None:
            self.player.sink = self._speaker()  # the speaker may have changed since it opened
            if self.player.sink is None:
                self.status.emit("No sound output: the recording plays without sound.")
        self.player.toggle()
        if self.player.error:
            self.status.emit(f"Playing without sound: {self.player.error}")
            self.player.error = None
        self._show_position(self.player.tick())

    def seek(self, t: float) -> None:
        self.player.seek(t)
        self._show_position(self.player.position)

    def step(self, seconds: float) -> None:
        self.seek(self.player.position + seconds)

    def set_speed(self, speed: float) -> None:
        self.player.set_speed(speed)
        self.transport.set_speed(speed)

    # ------------------------------------------------------------------ zoom

    @property
    def view(self) -> tuple[float, float]:
        return self.ruler.view

    def zoom_at(self, factor: float, t: float | None = None) -> None:
        """Zoom the timeline by `factor` (>1: in) keeping `t` (default: the play head) in place."""
        duration = self.player.duration
        if duration <= 0:
            return
        v0, v1 = self.view
        t = self.player.position if t is None else t
        span = min(max((v1 - v0) / factor, min(MIN_VIEW_S, duration)), duration)
        frac = (t - v0) / (v1 - v0) if v0 <= t <= v1 else 0.5
        self._set_view(t - frac * span, span)

    def scroll_by(self, seconds: float) -> None:
        v0, v1 = self.view
        self._set_view(v0 + seconds, v1 - v0)

    def _set_view(self, v0: float, span: float) -> None:
        v0 = min(max(v0, 0.0), max(self.player.duration - span, 0.0))
        for lane in self.lanes:
            lane.set_view(v0, v0 + span)

    def _follow(self, t: float) -> None:
        """Keep the play head in a zoomed view: page on when it leaves it."""
        v0, v1 = self.view
        if not v0 <= t <= v1:
            self._set_view(t - 0.1 * (v1 - v0), v1 - v0)

    def tick(self) -> None:
        self._show_position(self.player.tick())

    def _state_changed(self, playing: bool) -> None:
        self.transport.set_playing(playing)
        if playing:
            self.timer.start()
        else:
            self.timer.stop()

    @property
    def position(self) -> float:
        return self.player.position

    def _show_position(self, t: float) -> None:
        rec = self.recording
        if rec is None:
            return
        self.transport.set_position(t)
        self._follow(t)
        for lane in self.lanes:
            lane.set_position(t)
        turn = rec.turn_at(t)
        self.turn_lane.set_current(turn)
        self.transcript.set_current(turn)
        if rec.frames:
            index = rec.frame_at(t)
            self.frame.show_frame(rec.frames[index].path if index is not None else None)

    def hideEvent(self, event) -> None:  # type: ignore[no-untyped-def]
        self.player.pause()  # leaving the page stops the sound
        super().hideEvent(event)
