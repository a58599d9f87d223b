"""The viewer's transport bar: play/pause, the position slider with elapsed / total time, and the
speed (0.5×–2×). It only shows state and emits what the user asked for."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QIcon, QPainter, QPalette, QPixmap, QPolygonF
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSlider, QToolButton, QWidget

from desktop.recording.player import SPEEDS
from desktop.ui.recordings.format import clock_text

STEPS_PER_S = 10  # slider resolution


class Transport(QWidget):
    toggled = Signal()
    seek = Signal(float)
    speed_changed = Signal(float)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.duration = 0.0
        self.empty = ""  # why there is nothing to play ("" when there is)
        self.play = QToolButton()
        self.play.setAutoRaise(True)
        self.play.setIconSize(QSize(20, 20))
        self.playing = False
        self.play.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # Space belongs to the viewer
        self.play.clicked.connect(self.toggled)
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # the arrows seek by 5 s in the viewer
        self.slider.sliderMoved.connect(lambda v: self.seek.emit(v / STEPS_PER_S))
        self.slider.actionTriggered.connect(self._slider_action)
        self.time = QLabel()
        self.time.setMinimumWidth(self.time.fontMetrics().horizontalAdvance("0:00:00 / 0:00:00") + 6)
        self.time.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.speed = QComboBox()
        self.speed.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.speed.setToolTip("Playback speed (the voices' pitch changes with it)")
        for s in SPEEDS:
            self.speed.addItem(f"{s:g}×", s)
        self.speed.setCurrentIndex(SPEEDS.index(1.0))
        self.speed.currentIndexChanged.connect(lambda i: self.speed_changed.emit(self.speed.itemData(i)))
        row = QHBoxLayout(self)
        row.setContentsMargins(8, 4, 8, 4)
        row.addWidget(self.play)
        row.addWidget(self.slider, 1)
        row.addWidget(self.time)
        row.addWidget(self.speed)
        self.set_playing(False)

    def _slider_action(self, action: int) -> None:
        if action != QSlider.SliderAction.SliderMove:  # a click on the groove (page step)
            self.seek.emit(self.slider.sliderPosition() / STEPS_PER_S)

    def set_duration(self, duration: float) -> None:
        self.duration = duration
        self.slider.setRange(0, int(round(duration * STEPS_PER_S)))
        self.slider.setPageStep(5 * STEPS_PER_S)
        self.set_position(0.0)

    def set_position(self, t: float) -> None:
        if not self.slider.isSliderDown():
            self.slider.blockSignals(True)
            self.slider.setValue(int(round(t * STEPS_PER_S)))
            self.slider.blockSignals(False)
        self.time.setText(self.empty or f"{clock_text(t)} / {clock_text(self.duration)}")

    def set_playable(self, playable: bool, why: str = "") -> None:
        """Play, the slider and the speed on or off; off, `why` stands in place of the times."""
        self.empty = "" if playable else why
        for widget in (self.play, self.slider, self.speed):
            widget.setEnabled(playable)
        self.set_playing(self.playing)
        self.set_position(0.0)

    def set_playing(self, playing: bool) -> None:
        self.playing = playing
        group = QPalette.ColorGroup.Normal if self.play.isEnabled() else QPalette.ColorGroup.Disabled
        self.play.setIcon(transport_icon("pause" if playing else "play",
                                         self.palette().color(group, QPalette.ColorRole.WindowText)))
        self.play.setToolTip(self.empty or ("Pause (Space)" if playing else "Play (Space)"))

    def set_speed(self, speed: float) -> None:
        self.speed.setCurrentIndex(SPEEDS.index(speed))

    def changeEvent(self, event: QEvent) -> None:  # the icon follows a light/dark switch
        if event.type() == QEvent.Type.PaletteChange:
            self.set_playing(self.playing)
        super().changeEvent(event)


def transport_icon(kind: str, color: QColor) -> QIcon:
    """A play triangle or two pause bars in `color` (the style's own icons are black on dark themes)."""
    pix = QPixmap(32, 32)
    pix.fill(Qt.GlobalColor.transparent)
    p = QPainter(pix)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    p.setPen(Qt.PenStyle.NoPen)
    p.setBrush(color)
    if kind == "play":
        p.drawPolygon(QPolygonF([QPointF(9, 5), QPointF(27, 16), QPointF(9, 27)]))
    else:
        p.drawRoundedRect(QRectF(8, 6, 6, 20), 1.5, 1.5)
        p.drawRoundedRect(QRectF(18, 6, 6, 20), 1.5, 1.5)
    p.end()
    return QIcon(pix)
