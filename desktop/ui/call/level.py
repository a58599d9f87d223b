"""The microphone's input level as a horizontal bar: "level" events (RMS dBFS) mapped from
-60..0 dB to 0..100 %, with a quick rise and a gentle fall so speech reads as a steady bar."""

from __future__ import annotations

from PySide6.QtCore import QRectF, QSize, Qt, QTimer
from PySide6.QtGui import QColor, QPainter
from PySide6.QtWidgets import QSizePolicy, QWidget

from desktop.ui.style import muted, tint

FLOOR_DB = -60.0
FALL_PER_TICK = 4  # percent the bar falls every TICK_MS when the level drops
TICK_MS = 40
SPEECH_COLOR = QColor("#2e9d57")
LOUD_COLOR = QColor("#d9822b")  # near clipping

def level_percent(db: float) -> int:
    """dBFS → 0..100: -60 dB or quieter is 0, 0 dB is 100."""
    if db != db:  # NaN: no reading
        return 0
    return round(100.0 * (min(max(db, FLOOR_DB), 0.0) - FLOOR_DB) / -FLOOR_DB)

class LevelMeter(QWidget):
    """`set_db(db)` from level events; `set_muted(True)` shows "Mic muted" instead of a bar;
    `reset()` when no call runs. `value` is the percentage drawn now (the target at once on a rise)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.value = 0
        self._target = 0
        self.muted = False
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self.setAccessibleName("Microphone level")
        self._timer = QTimer(self)
        self._timer.setInterval(TICK_MS)
        self._timer.timeout.connect(self._fall)

    def sizeHint(self) -> QSize:
        return QSize(180, max(self.fontMetrics().height(), 14))

    def set_db(self, db: float) -> None:
        self._target = level_percent(db)
        if self._target >= self.value:
            self.value = self._target
        elif not self._timer.isActive():
            self._timer.start()
        self.update()

    def set_muted(self, on: bool) -> None:
        self.muted = on
        self.update()

    def reset(self) -> None:
        self._timer.stop()
        self.value = self._target = 0
        self.muted = False
        self.update()

    def _fall(self) -> None:
        self.value = max(self._target, self.value - FALL_PER_TICK)
        if self.value <= self._target:
            self._timer.stop()
        self.update()

    def paintEvent(self, _event) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        bar = QRectF(0.5, (self.height() - 8) / 2, self.width() - 1.0, 8)
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(tint(self, 0.14))
        p.drawRoundedRect(bar, 4, 4)
        if self.muted or not self.isEnabled():
            if self.muted:
                p.setPen(muted(self))
                p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, "Mic muted")
            return
        if self.value > 0:
            fill = QRectF(bar.x(), bar.y(), max(bar.width() * self.value / 100.0, 8.0), bar.height())
            p.setBrush(LOUD_COLOR if self.value >= 92 else SPEECH_COLOR)
            p.drawRoundedRect(fill, 4, 4)
        p.end()

    def changeEvent(self, event) -> None:
        if event.type() == event.Type.PaletteChange:
            self.update()
        super().changeEvent(event)
