"""The viewer's transport bar: play/pause, the position slider with elapsed / total time, and the
speed (0.5×–2×). It only shows state and emits what the user asked for."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSlider, QStyle, QToolButton, QWidget

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
        self.play = QToolButton()
        self.play.setAutoRaise(True)
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
        self.time.setText(f"{clock_text(t)} / {clock_text(self.duration)}")

    def set_playing(self, playing: bool) -> None:
        icon = QStyle.StandardPixmap.SP_MediaPause if playing else QStyle.StandardPixmap.SP_MediaPlay
        self.play.setIcon(self.style().standardIcon(icon))
        self.play.setToolTip("Pause (Space)" if playing else "Play (Space)")

    def set_speed(self, speed: float) -> None:
        self.speed.setCurrentIndex(SPEEDS.index(speed))
