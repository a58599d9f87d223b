"""The call's phase as a coloured dot and a word (Listening, You're speaking, Thinking…, …), so
a glance tells whose turn it is."""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPixmap
from PySide6.QtWidgets import QHBoxLayout, QLabel, QWidget

from desktop.call.state import CallPhase

IDLE_TEXT = "Not in a call"
PHASES: dict[CallPhase, tuple[str, str]] = {  # phase → label, dot colour
    CallPhase.LISTENING: ("Listening", "#2e9d57"),
    CallPhase.USER_SPEAKING: ("You're speaking", "#3a7bd5"),
    CallPhase.TRANSCRIBING: ("Transcribing…", "#8e5cc7"),
    CallPhase.THINKING: ("Thinking…", "#d9822b"),
    CallPhase.SPEAKING: ("Speaking", "#1a9bb0"),
    CallPhase.PAUSED: ("Paused", "#9aa0a6"),
    CallPhase.ENDED: ("Call ended", "#9aa0a6"),
}
IDLE_COLOR = "#9aa0a6"


def dot(color: str, size: int) -> QPixmap:
    pix = QPixmap(size * 2, size * 2)  # drawn at 2x: crisp on high-DPI screens
    pix.setDevicePixelRatio(2.0)
    pix.fill(Qt.GlobalColor.transparent)
    p = QPainter(pix)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    p.setPen(Qt.PenStyle.NoPen)
    p.setBrush(QColor(color))
    p.drawEllipse(QRectF(1, 1, size - 2, size - 2))
    p.end()
    return pix


class PhaseIndicator(QWidget):
    """`set_phase(phase)`; None: no call. `text` is what it says."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.phase: CallPhase | None = None
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(8)
        self.dot = QLabel()
        self.label = QLabel()
        font = self.label.font()
        font.setPointSizeF(font.pointSizeF() * 1.25)
        font.setBold(True)
        self.label.setFont(font)
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        layout.addWidget(self.dot)
        layout.addWidget(self.label)
        self.set_phase(None)

    @property
    def text(self) -> str:
        return self.label.text()

    def set_phase(self, phase: CallPhase | None) -> None:
        self.phase = phase
        text, color = PHASES.get(phase, (IDLE_TEXT, IDLE_COLOR)) if phase is not None else (IDLE_TEXT, IDLE_COLOR)
        self.label.setText(text)
        self.dot.setPixmap(dot(color, self.label.fontMetrics().height() - 4))
        self.setAccessibleName(f"Call: {text}")
