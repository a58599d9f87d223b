"""The viewer's timeline lanes, all on one time axis: the turns (the text timeline of a chat), a
voice's waveform (min/max per pixel column, painted once per size), with barge-in marks and the
play head on each; click or drag to seek."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QMouseEvent, QPainter, QPaintEvent, QPalette, QPen, QPixmap, QResizeEvent
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from desktop.recording.reader import Turn
from desktop.ui.chat.style import blend
from desktop.ui.recordings.format import clock_text

LABEL_W = 84  # the lane's name on the left; time starts after it
BARGE_IN = QColor("#d9534f")


class TimeLane(QWidget):
    """Maps time to x over [LABEL_W, width - 8]; draws the name, the marks and the play head."""

    seek = Signal(float)

    def __init__(self, name: str, height: int, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.name = name
        self.duration = 1.0
        self.position = 0.0
        self.marks: list[float] = []
        self.setFixedHeight(height)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setMouseTracking(True)

    def sizeHint(self) -> QSize:
        return QSize(600, self.height())

    def set_duration(self, duration: float) -> None:
        self.duration = max(duration, 1e-3)
        self.update()

    def set_position(self, t: float) -> None:
        if abs(t - self.position) * self.span() / self.duration >= 0.5:  # moved a visible bit
            self.position = t
            self.update()
        else:
            self.position = t

    def span(self) -> float:
        return max(1.0, self.width() - LABEL_W - 8)

    def x_of(self, t: float) -> float:
        return LABEL_W + t / self.duration * self.span()

    def t_of(self, x: float) -> float:
        return min(max((x - LABEL_W) / self.span() * self.duration, 0.0), self.duration)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            self.seek.emit(self.t_of(event.position().x()))

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        x = event.position().x()
        if event.buttons() & Qt.MouseButton.LeftButton:
            self.seek.emit(self.t_of(x))
        elif x >= LABEL_W:  # the time under the pointer
            QToolTip.showText(event.globalPosition().toPoint(), f"{self.name} · {clock_text(self.t_of(x))}".lstrip(" ·"), self)

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        pal = self.palette()
        rect = QRectF(LABEL_W, 2, self.span(), self.height() - 4)
        p.fillRect(rect, blend(pal.color(QPalette.ColorRole.Base), pal.color(QPalette.ColorRole.Text), 0.03))
        self.paint_content(p, rect)
        p.setPen(pal.color(QPalette.ColorRole.PlaceholderText))
        p.drawText(QRectF(4, 0, LABEL_W - 10, self.height()), Qt.AlignmentFlag.AlignVCenter, self.name)
        pen = QPen(BARGE_IN, 1.5, Qt.PenStyle.DashLine)
        p.setPen(pen)
        for t in self.marks:
            x = self.x_of(t)
            p.drawLine(QPointF(x, rect.top()), QPointF(x, rect.bottom()))
        p.setPen(QPen(pal.color(QPalette.ColorRole.Highlight), 2))
        x = self.x_of(self.position)
        p.drawLine(QPointF(x, 0), QPointF(x, self.height()))
        p.end()

    def paint_content(self, p: QPainter, rect: QRectF) -> None:
        """What the lane shows between its name and its marks."""


def column_peaks(mins: np.ndarray, maxs: np.ndarray, columns: int, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Reduce per-bin peaks to `columns` pixel columns spanning `bins` bins (the lane's duration)."""
    if columns <= 0 or len(maxs) == 0:
        return np.zeros(max(columns, 0), np.float32), np.zeros(max(columns, 0), np.float32)
    edges = np.minimum((np.arange(columns) * bins / columns).astype(np.int64), bins)
    lo = np.zeros(columns, np.float32)
    hi = np.zeros(columns, np.float32)
    inside = edges < len(maxs)
    if inside.any():
        starts = edges[inside]
        lo[inside] = np.minimum.reduceat(mins, starts)
        hi[inside] = np.maximum.reduceat(maxs, starts)
        # reduceat takes a single bin where two columns share a start: fine for a waveform
    return lo, hi


class WaveformLane(TimeLane):
    """One voice. `set_peaks(mins, maxs, per_second)`; the picture is cached per size, in a quiet
    colour ahead of the play head and a strong one behind it."""

    def __init__(self, name: str, color: QColor, parent: QWidget | None = None) -> None:
        super().__init__(name, 64, parent)
        self.color = color
        self._peaks: tuple[np.ndarray, np.ndarray] = (np.zeros(0, np.float32), np.zeros(0, np.float32))
        self._per_second = 100
        self._cache: tuple[QSize, QPixmap, QPixmap] | None = None

    def set_peaks(self, mins: np.ndarray, maxs: np.ndarray, per_second: int) -> None:
        self._peaks, self._per_second, self._cache = (mins, maxs), per_second, None
        self.update()

    def set_duration(self, duration: float) -> None:
        self._cache = None
        super().set_duration(duration)

    def resizeEvent(self, event: QResizeEvent) -> None:
        self._cache = None
        super().resizeEvent(event)

    def pictures(self) -> tuple[QPixmap, QPixmap]:
        """(ahead, played) pictures of the waveform at the lane's size (built once per size)."""
        size = QSize(int(self.span()), self.height() - 4)
        if self._cache is None or self._cache[0] != size:
            lo, hi = column_peaks(*self._peaks, size.width(), int(np.ceil(self.duration * self._per_second)))
            mid, half = size.height() / 2, size.height() / 2 - 2
            pics = []
            for color in (blend(self.color, self.palette().color(QPalette.ColorRole.Base), 0.55), self.color):
                pix = QPixmap(size)
                pix.fill(Qt.GlobalColor.transparent)
                p = QPainter(pix)
                p.setPen(QPen(color, 1))
                for x in range(size.width()):
                    top, bottom = mid - hi[x] * half, mid - lo[x] * half
                    p.drawLine(QPointF(x + 0.5, top), QPointF(x + 0.5, max(bottom, top + 1)))
                p.end()
                pics.append(pix)
            self._cache = (size, pics[0], pics[1])
        return self._cache[1], self._cache[2]

    def paint_content(self, p: QPainter, rect: QRectF) -> None:
        if not len(self._peaks[1]):
            p.setPen(self.palette().color(QPalette.ColorRole.PlaceholderText))
            p.drawText(rect, Qt.AlignmentFlag.AlignCenter, "no audio")
            return
        ahead, played = self.pictures()
        p.drawPixmap(rect.topLeft(), ahead)
        cut = int(self.x_of(self.position) - rect.left())
        if cut > 0:
            p.drawPixmap(rect.topLeft(), played, QRectF(0, 0, cut, played.height()))


class TurnLane(TimeLane):
    """The turns as blocks from each turn's start to the next one's, numbered and labelled with the
    user's words; the current one highlighted. For a chat this is the whole timeline."""

    def __init__(self, parent: QWidget | None = None, height: int = 34) -> None:
        super().__init__("Turns", height, parent)
        self.turns: list[Turn] = []
        self.current: int | None = None

    def set_turns(self, turns: list[Turn]) -> None:
        self.turns = turns
        self.update()

    def set_current(self, index: int | None) -> None:
        if index != self.current:
            self.current = index
            self.update()

    def paint_content(self, p: QPainter, rect: QRectF) -> None:
        pal = self.palette()
        base, text, hl = (pal.color(r) for r in (QPalette.ColorRole.Base, QPalette.ColorRole.Text,
                                                 QPalette.ColorRole.Highlight))
        fm = p.fontMetrics()
        for i, turn in enumerate(self.turns):
            end = self.turns[i + 1].start if i + 1 < len(self.turns) else self.duration
            x0, x1 = self.x_of(turn.start), self.x_of(end)
            block = QRectF(x0 + 1, rect.top() + 3, max(2.0, x1 - x0 - 2), rect.height() - 6)
            current = i == self.current
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(blend(base, hl, 0.45 if current else (0.14 if i % 2 else 0.22)))
            p.drawRoundedRect(block, 4, 4)
            label = f"{turn.turn}  {turn.user_text}".strip()
            room = int(block.width() - 8)
            if room > fm.horizontalAdvance("00"):
                p.setPen(text)
                p.drawText(block.adjusted(5, 0, -3, 0), Qt.AlignmentFlag.AlignVCenter,
                           fm.elidedText(label, Qt.TextElideMode.ElideRight, room))


def tick_step(duration: float, width: float, min_px: float = 70) -> float:
    """The ruler's step: the smallest of 1, 2, 5, 10, 15, 30 s, 1, 2, 5, 10, 15, 30 min, 1 h … whose
    ticks stay at least `min_px` apart."""
    for step in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200, 86400):
        if step / max(duration, 1e-3) * width >= min_px:
            return float(step)
    return max(86400.0, duration / 10)  # never more than a few ticks


class RulerLane(TimeLane):
    """Time labels along the axis (m:ss)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("", 18, parent)

    def paint_content(self, p: QPainter, rect: QRectF) -> None:
        pal = self.palette()
        p.fillRect(rect, pal.color(QPalette.ColorRole.Window))
        p.setPen(pal.color(QPalette.ColorRole.PlaceholderText))
        step = tick_step(self.duration, self.span())
        t = 0.0
        while t <= self.duration + 1e-6:
            x = self.x_of(t)
            p.drawLine(QPointF(x, rect.top()), QPointF(x, rect.top() + 4))
            label = clock_text(t)
            if x + 3 + p.fontMetrics().horizontalAdvance(label) <= rect.right() + 8:  # never cut off
                p.drawText(QRectF(x + 3, rect.top(), 60, rect.height()), Qt.AlignmentFlag.AlignVCenter, label)
            t += step
