"""Trying the chosen devices in Settings → Audio: "Test" plays a short tone through the speaker,
"Check" shows the microphone's level while the user speaks (engine side: media/device_check.py)."""

from __future__ import annotations

from typing import Callable

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QWidget

from desktop.errors import OmnideskError
from desktop.media.device_check import MicLevel, ToneTest
from desktop.ui.call.level import LevelMeter
from desktop.ui.style import muted

POLL_MS = 50
Chosen = Callable[[], "str | None"]  # the device chosen in the page's combo now


class ToneButton(QPushButton):
    """Plays the test tone on the chosen speaker; says why when it cannot (`problem`)."""

    def __init__(self, tone: ToneTest, chosen: Chosen, problem: QLabel) -> None:
        super().__init__("&Test")
        self.tone, self.chosen, self.problem = tone, chosen, problem
        self.setToolTip("Play a short tone through this speaker")
        self.clicked.connect(self.play)
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self._poll)

    def play(self) -> None:
        self.problem.hide()
        try:
            self.tone.play(self.chosen())
        except OmnideskError as exc:
            self.problem.setText(exc.message)
            self.problem.show()
            return
        self.setEnabled(False)
        self.setText("Playing…")
        self._timer.start()

    def _poll(self) -> None:
        if not self.tone.poll():
            self.stop()

    def stop(self) -> None:
        self._timer.stop()
        self.tone.stop()
        self.setText("&Test")
        self.setEnabled(True)


class MicCheck(QWidget):
    """A "Check" toggle and a level meter: while on, the chosen microphone is open and the meter
    moves with its level; off when toggled, when the device changes or the page is hidden."""

    def __init__(self, level: MicLevel, chosen: Chosen, problem: QLabel) -> None:
        super().__init__()
        self.level, self.chosen, self.problem = level, chosen, problem
        self.button = QPushButton("C&heck")
        self.button.setCheckable(True)
        self.button.setToolTip("Open this microphone and show its level while you speak")
        self.meter = LevelMeter()
        self.meter.setMinimumWidth(140)
        self.meter.setEnabled(False)
        self.hint = QLabel("Speak: the bar moves")
        self.hint.setStyleSheet(f"color: {muted(self).name()};")
        self.hint.hide()
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.button)
        row.addWidget(self.meter, 1)
        row.addWidget(self.hint)
        self.button.toggled.connect(self._toggled)
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self.poll)

    def _toggled(self, on: bool) -> None:
        if on:
            self.start()
        else:
            self.stop()

    def start(self) -> None:
        self.problem.hide()
        try:
            self.level.start(self.chosen())
        except OmnideskError as exc:
            self.problem.setText(exc.message)
            self.problem.show()
            self.button.setChecked(False)
            return
        self.meter.setEnabled(True)
        self.hint.show()
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()
        self.level.stop()
        self.meter.reset()
        self.meter.setEnabled(False)
        self.hint.hide()
        if self.button.isChecked():
            self.button.setChecked(False)

    def restart(self) -> None:
        """The chosen device changed: listen to the new one if checking."""
        if self.level.on:
            self.start()

    def poll(self) -> None:
        """Read the level now (the timer's body; tests call it on their own clock)."""
        self.meter.set_db(self.level.level_db())
