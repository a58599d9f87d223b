"""The chat page's voice: the Voice toggle (Ctrl+Shift+V), Replay on spoken replies, and the
Voice's events brought onto the Qt thread as button states and notes. The replies themselves are
spoken by the Qt-free speech.reply_voice.ReplyVoice, straight from their event streams."""

from __future__ import annotations

from PySide6.QtCore import QObject, QPoint, QPointF, QRect, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QIcon, QPainter, QPainterPath, QPalette, QPen, QPixmap
from PySide6.QtWidgets import QToolButton, QToolTip, QWidget

from desktop.chat.presets import PresetStore
from desktop.chat.reply import Reply
from desktop.speech.reply_voice import ReplyVoice
from desktop.speech.voice import Voice
from desktop.speech.voice_audio import VoiceEvent, VoiceEventKind
from desktop.ui import shortcuts
from desktop.ui.chat.message_view import MessageView
from desktop.ui.chat.message_widget import MessageWidget, VoiceState

NOTICE_MS = 5000  # how long the "why the voice is off" notice stays by the button


def tip_off() -> str:
    return f"Speak replies aloud as they are written ({shortcuts.native('voice')})"


def tip_on() -> str:
    return f"Replies are spoken aloud — click to stop speaking them ({shortcuts.native('voice')})"


def off_reason(reason: str | None) -> str:
    """The tooltip of a voice that cannot work: "Audio is off: No sound output device found"."""
    return "Audio is off: " + (reason or "no sound output").replace(" — audio is off", "")


def _speaker(color: QColor, on: bool) -> QPixmap:
    """A loudspeaker drawn in `color`: with two sound waves (on) or crossed out (off)."""
    pix = QPixmap(64, 64)
    pix.fill(Qt.GlobalColor.transparent)
    p = QPainter(pix)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    body = QPainterPath()
    body.addPolygon([QPointF(4, 24), QPointF(16, 24), QPointF(30, 10), QPointF(30, 54), QPointF(16, 40),
                     QPointF(4, 40), QPointF(4, 24)])
    p.fillPath(body, color)
    p.setPen(QPen(color, 5.0, Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap))
    if on:
        for r in (10.0, 21.0):
            p.drawArc(QRectF(32 - r, 32 - r, 2 * r, 2 * r), -50 * 16, 100 * 16)
    else:
        p.drawLine(QPointF(40, 22), QPointF(58, 42))
        p.drawLine(QPointF(58, 22), QPointF(40, 42))
    p.end()
    return pix


def speaker_icon(color: QColor) -> QIcon:
    """For a checkable button: sound waves when checked, crossed out when not (no emoji font needed)."""
    icon = QIcon()
    icon.addPixmap(_speaker(color, True), QIcon.Mode.Normal, QIcon.State.On)
    icon.addPixmap(_speaker(color, False), QIcon.Mode.Normal, QIcon.State.Off)
    return icon


class ChatVoice(QObject):
    """`toggled(bool)`: the user turned the voice on or off (the window saves it as
    settings.voice_enabled). The page hands each new reply to `follow` (it is spoken as it
    streams while the voice is on) and calls `silence()` whenever playback must stop at once."""

    toggled = Signal(bool)
    status = Signal(str)
    _event = Signal(object)  # VoiceEvent, from the voice's threads to this (Qt) thread

    def __init__(self, view: MessageView, enabled: bool, parent: QWidget, presets: PresetStore | None = None) -> None:
        super().__init__(parent)
        self.view, self.voice, self.enabled, self.presets = view, None, enabled, presets
        self.replies: ReplyVoice | None = None  # speaks the replies of `voice`
        self._told_off = False
        self.button = QToolButton(parent)
        self.button.setText("Voice")
        self.button.setIcon(speaker_icon(parent.palette().color(QPalette.ColorRole.ButtonText)))
        self.button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.button.setCheckable(True)
        self.button.setShortcut(shortcuts.sequence("voice"))
        self.button.setAccessibleName("Speak replies")
        self.button.toggled.connect(self._user_toggled)
        self._event.connect(self._on_event, Qt.ConnectionType.QueuedConnection)
        view.replay_requested.connect(self._replay)
        self._sync()

    # ------------------------------------------------------------------ setup

    @property
    def speaks(self) -> bool:
        return self.enabled and self.voice is not None and self.voice.available

    @property
    def voice_playing(self) -> bool:
        return self.voice is not None and self.voice.speaking

    def set_voice(self, voice: Voice | None) -> None:
        """Use this voice (None: no voice, the toggle is hidden); with an unavailable one the toggle
        stays off, its tooltip says why, and so does the status bar, once, if the settings have the
        voice on (with it off, nobody asked for sound: the tooltip and a click tell)."""
        if voice is self.voice:
            return
        if self.voice is not None:
            self.voice.stop()
            self.voice.remove_listener(self._listen)
        self.voice, self.replies = voice, None
        if voice is not None:
            self.replies = ReplyVoice(voice, lambda: self.speaks, self._began)
            voice.add_listener(self._listen)
            if not voice.available:
                self._tell_off_once()
            elif self.speaks:
                voice.prepare()
        self._sync()
        self.refresh()

    def _tell_off_once(self) -> None:
        """The status bar says why the voice cannot work, once, and only to a user who has it on."""
        voice = self.voice
        if voice is not None and not voice.available and self.enabled and not self._told_off:
            self._told_off = True
            QTimer.singleShot(0, lambda: self.status.emit(off_reason(voice.reason)))

    def set_enabled(self, on: bool) -> None:
        """Follow the settings (no `toggled` signal)."""
        if on != self.enabled:
            self.enabled = on
            self._apply(on)
        self._tell_off_once()
        self._sync()

    def _user_toggled(self, on: bool) -> None:
        if self.voice is not None and not self.voice.available:  # it cannot go on: say why, stay off
            self._sync()
            self.explain_off()
            return
        if on == self.enabled:
            return
        self.enabled = on
        self._apply(on)
        self._sync()
        self.toggled.emit(on)
        self.status.emit("Voice on: replies are spoken aloud" if on else "Voice off")

    def _apply(self, on: bool) -> None:
        if on and self.speaks:
            self.voice.prepare()
        elif not on:
            self.silence()

    def toggle(self) -> None:
        """What Ctrl+Shift+V does (the button's own shortcut; for a menu action); with no sound
        output it says why the voice stays off."""
        if self.button.isEnabled():
            self.button.toggle()

    def state(self) -> tuple[bool, bool]:
        """(whether the Voice toggle can be used now, whether the voice is on): the menu bar's item."""
        button = self.button
        return button.isVisibleTo(self.parent()) and button.isEnabled(), button.isChecked()

    def explain_off(self) -> None:
        """Why the voice cannot be turned on, by the button (a few seconds) and in the status bar
        (a click or Ctrl+Shift+V on an unavailable voice)."""
        text = off_reason(self.voice.reason if self.voice is not None else None)
        self.status.emit(text)
        button = self.button
        if button.isVisible():
            QToolTip.showText(button.mapToGlobal(QPoint(0, -button.height() - 8)), text, button, QRect(), NOTICE_MS)

    def _sync(self) -> None:
        button, voice = self.button, self.voice
        button.setVisible(voice is not None)
        button.setEnabled(voice is not None)  # also when unavailable: a click says why
        button.blockSignals(True)
        button.setChecked(self.speaks)
        button.blockSignals(False)
        if voice is not None and not voice.available:
            button.setToolTip(off_reason(voice.reason))
        else:
            button.setToolTip(tip_on() if self.speaks else tip_off())

    # ------------------------------------------------------------------ the page's turns

    def follow(self, reply: Reply) -> None:
        """Speak this reply as it streams, while the voice is on, in the voice and at the rate of
        its conversation's preset (an edited prompt: the Settings' voice)."""
        if self.replies is not None:
            if self.speaks:
                preset = self.presets.get(reply.conv.preset) if self.presets is not None else None
                self.voice.use(*(preset.speech() if preset is not None else (None, None, 1.0)))
            self.replies.follow(reply)

    def _began(self, rid: str) -> None:
        widget = self.view.widget_for(rid)
        if widget is not None:
            widget.set_voice_state(VoiceState.SPEAKING)

    def silence(self) -> None:
        """Stop all playback now (Stop, Esc, a new message, another conversation, Regenerate)."""
        if self.replies is not None:
            self.replies.silence()

    def refresh(self) -> None:
        """Give the shown replies whose audio is kept their Replay button (after a rebuild)."""
        for widget in self.view.widgets():
            if widget.role == "assistant" and widget.request_id and widget.voice_state is VoiceState.NONE:
                widget.set_voice_state(self._state_of(widget.request_id))

    # ------------------------------------------------------------------ voice events, Replay

    def _listen(self, event: VoiceEvent) -> None:
        """The voice's listener (its threads): hop to the Qt thread."""
        try:
            self._event.emit(event)
        except RuntimeError:  # the page was deleted without set_voice(None)
            if self.voice is not None:
                self.voice.remove_listener(self._listen)

    def _state_of(self, rid: str) -> VoiceState:
        has_audio = self.voice is not None and self.voice.audio_of(rid) is not None
        return VoiceState.READY if has_audio else VoiceState.NONE

    def _on_event(self, event: VoiceEvent) -> None:
        kind, rid = event.kind, event.request_id
        if kind is VoiceEventKind.LOADING:
            self.status.emit(event.message)
        elif kind is VoiceEventKind.FAILED and rid is None:
            self.status.emit(f"The voice could not be loaded: {event.message}")
        widget = self.view.widget_for(rid) if rid else None
        if widget is None:
            return
        if kind is VoiceEventKind.STARTED:
            widget.set_voice_state(VoiceState.PLAYING if event.replay else VoiceState.SPEAKING)
        elif kind is VoiceEventKind.FINISHED:
            widget.set_voice_state(self._state_of(rid))
        elif kind is VoiceEventKind.FAILED:
            widget.set_voice_note(f"Couldn't speak this reply: {event.message}")
            widget.set_voice_state(self._state_of(rid))

    def _replay(self, index: int) -> None:
        widget = self.view.widget_at(index)
        if self.voice is None or widget is None or not widget.request_id:
            return
        rid = widget.request_id
        if widget.voice_state in (VoiceState.SPEAKING, VoiceState.PLAYING):  # the button reads Stop
            self.replies.drop(rid)
            widget.set_voice_state(self._state_of(rid))
            return
        self.silence()
        if self.voice.replay(rid):
            widget.set_voice_note("")
        else:
            widget.set_voice_state(VoiceState.NONE)
            self.status.emit("This reply's voice is no longer kept")
