"""The viewer's timeline lanes, all on one time axis and one view window (zoom): the time ruler, the
turns (the text timeline of a chat), a voice's waveform (min/max per pixel column, painted once per
size and view), with barge-in marks and the play head on each; click or drag to seek, Ctrl+wheel
to zoom, wheel to scroll when zoomed."""

from __future__ import annotations

import bisect

import numpy as np
from PySide6.QtCore import QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import (
    QColor, QMouseEvent, QPainter, QPaintEvent, QPalette, QPen, QPixmap, QResizeEvent, QWheelEvent,
)
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from desktop.recording.reader import Turn
from desktop.ui.style import blend
from desktop.ui.recordings.format import clock_text

LABEL_W = 84  # the lane's name on the left; time starts after it
BARGE_IN = QColor("#d9534f")
ZOOM_STEP = 1.5


class TimeLane(QWidget):
    """Maps the view [v0, v1] (seconds) to x over [LABEL_W, width - 8]; draws the name, the marks
    and the play head. Emits `seek(t)`, `zoom(factor, t)` (Ctrl+wheel; >1 zooms in around t) and
    `scroll(seconds)` (wheel, when zoomed)."""

    seek = Signal(float)
    zoom = Signal(float, float)
    scroll = Signal(float)

    def __init__(self, name: str, height: int, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.name = name
        self.duration = 1.0
        self.view = (0.0, 1.0)
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
        self.set_view(0.0, self.duration)

    def set_view(self, v0: float, v1: float) -> None:
        self.view = (v0, max(v1, v0 + 1e-3))
        self.update()

    @property
    def zoomed(self) -> bool:
        return self.view[1] - self.view[0] < self.duration - 1e-6

    def set_position(self, t: float) -> None:
        if abs(t - self.position) * self.span() / (self.view[1] - self.view[0]) >= 0.5:  # moved a visible bit
            self.position = t
            self.update()
        else:
            self.position = t

    def span(self) -> float:
        return max(1.0, self.width() - LABEL_W - 8)

    def x_of(self, t: float) -> float:
        v0, v1 = self.view
        return LABEL_W + (t - v0) / (v1 - v0) * self.span()

    def t_of(self, x: float) -> float:
        v0, v1 = self.view
        return min(max(v0 + (x - LABEL_W) / self.span() * (v1 - v0), 0.0), self.duration)

    def visible(self, t: float) -> bool:
        return self.view[0] <= t <= self.view[1]

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            self.seek.emit(self.t_of(event.position().x()))

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        x = event.position().x()
        if event.buttons() & Qt.MouseButton.LeftButton:
            self.seek.emit(self.t_of(x))
        elif x >= LABEL_W:  # the time under the pointer
            tip = f"{self.name} · {clock_text(self.t_of(x))}".lstrip(" ·")
            QToolTip.showText(event.globalPosition().toPoint(), tip, self)

    def wheelEvent(self, event: QWheelEvent) -> None:
        steps = event.angleDelta().y() / 120 or event.angleDelta().x() / 120
        if not steps:
            return super().wheelEvent(event)
        if event.modifiers() & Qt.KeyboardModifier.ControlModifier:
            self.zoom.emit(ZOOM_STEP ** steps, self.t_of(event.position().x()))
        elif self.zoomed:
            self.scroll.emit(-steps * 0.1 * (self.view[1] - self.view[0]))
        else:
            return super().wheelEvent(event)
        event.accept()

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        pal = self.palette()
        rect = QRectF(LABEL_W, 2, self.span(), self.height() - 4)
        p.fillRect(rect, blend(pal.color(QPalette.ColorRole.Base), pal.color(QPalette.ColorRole.Text), 0.03))
        p.save()
        p.setClipRect(rect.adjusted(0, -2, 1, 2))
        self.paint_content(p, rect)
        p.setPen(QPen(BARGE_IN, 1.5, Qt.PenStyle.DashLine))
        for t in self.marks:
            if self.visible(t):
                x = self.x_of(t)
                p.drawLine(QPointF(x, rect.top()), QPointF(x, rect.bottom()))
        if self.visible(self.position):
            p.setPen(QPen(pal.color(QPalette.ColorRole.Highlight), 2))
            x = self.x_of(self.position)
            p.drawLine(QPointF(x, 0), QPointF(x, self.height()))
        p.restore()
        p.setPen(pal.color(QPalette.ColorRole.PlaceholderText))
        p.drawText(QRectF(4, 0, LABEL_W - 10, self.height()), Qt.AlignmentFlag.AlignVCenter, self.name)
        p.end()

    def paint_content(self, p: QPainter, rect: QRectF) -> None:
        """What the lane shows between its name and its marks (clipped to `rect`)."""


def column_peaks(mins: np.ndarray, maxs: np.ndarray, columns: int, b0: float, b1: float) -> tuple[np.ndarray, np.ndarray]:
    """Reduce per-bin peaks to `columns` pixel columns spanning bins [b0, b1) (the view)."""
    lo = np.zeros(max(columns, 0), np.float32)
    hi = np.zeros(max(columns, 0), np.float32)
    if columns <= 0 or len(maxs) == 0:
        return lo, hi
    edges = np.floor(b0 + np.arange(columns + 1) * (b1 - b0) / columns).astype(np.int64)
    edges = np.clip(edges, 0, len(maxs))
    first, last = int(edges[0]), int(edges[-1])
    if last <= first:
        return lo, hi
    starts = edges[:-1] - first
    has = (edges[1:] > edges[:-1]) & (edges[:-1] < last)  # columns that cover at least one bin
    seg_lo = np.minimum.reduceat(mins[first:last], np.minimum(starts, last - first - 1))
    seg_hi = np.maximum.reduceat(maxs[first:last], np.minimum(starts, last - first - 1))
    lo[has], hi[has] = seg_lo[has], seg_hi[has]
    # a column narrower than a bin (zoomed far in) shows the bin it falls in
    thin = ~has & (edges[:-1] < len(maxs)) & (edges[:-1] >= 0)
    idx = np.minimum(edges[:-1][thin], len(maxs) - 1)
    lo[thin], hi[thin] = mins[idx], maxs[idx]
    return lo, hi


class WaveformLane(TimeLane):
    """One voice. `set_peaks(mins, maxs, per_second)`; the picture is cached per size and view, in
    a quiet colour ahead of the play head and a strong one behind it."""

    def __init__(self, name: str, color: QColor, parent: QWidget | None = None) -> None:
        super().__init__(name, 64, parent)
        self.color = color
        self._peaks: tuple[np.ndarray, np.ndarray] = (np.zeros(0, np.float32), np.zeros(0, np.float32))
        self._per_second = 100
        self._cache: tuple[tuple, QPixmap, QPixmap] | None = None

    def set_peaks(self, mins: np.ndarray, maxs: np.ndarray, per_second: int) -> None:
        self._peaks, self._per_second, self._cache = (mins, maxs), per_second, None
        self.update()

    def resizeEvent(self, event: QResizeEvent) -> None:
        self._cache = None
        super().resizeEvent(event)

    def pictures(self) -> tuple[QPixmap, QPixmap]:
        """(ahead, played) pictures of the waveform at the lane's size and view (built once each)."""
        size = QSize(int(self.span()), self.height() - 4)
        key = (size.width(), size.height(), self.view)
        if self._cache is None or self._cache[0] != key:
            ps = self._per_second
            lo, hi = column_peaks(*self._peaks, size.width(), self.view[0] * ps, self.view[1] * ps)
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
            self._cache = (key, pics[0], pics[1])
        return self._cache[1], self._cache[2]

    def paint_content(self, p: QPainter, rect: QRectF) -> None:
        if not len(self._peaks[1]):
            p.setPen(self.palette().color(QPalette.ColorRole.PlaceholderText))
            p.drawText(rect, Qt.AlignmentFlag.AlignCenter, "no audio")
            return
        ahead, played = self.pictures()
        p.drawPixmap(rect.topLeft(), ahead)
        cut = int(min(max(self.x_of(self.position) - rect.left(), 0), played.width()))
        if cut > 0:
            p.drawPixmap(rect.topLeft(), played, QRectF(0, 0, cut, played.height()))


class TurnLane(TimeLane):
    """The turns as blocks from each turn's start to the next one's, numbered and labelled with the
    user's words; the current one highlighted. For a chat this is the whole timeline."""

    def __init__(self, parent: QWidget | None = None, height: int = 34) -> None:
        super().__init__("Turns", height, parent)
        self.turns: list[Turn] = []
        self.starts: list[float] = []  # the turns' start times (sorted), to paint only those in view
        self.current: int | None = None

    def set_turns(self, turns: list[Turn]) -> None:
        self.turns = turns
        self.starts = [t.start for t in turns]
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
        first = max(bisect.bisect_right(self.starts, self.view[0]) - 1, 0)  # the turns in view only
        for i in range(first, len(self.turns)):
            turn = self.turns[i]
            end = self.turns[i + 1].start if i + 1 < len(self.turns) else self.duration
            if turn.start > self.view[1]:
                break
            if end < self.view[0]:
                continue
            x0, x1 = self.x_of(turn.start), self.x_of(end)
            block = QRectF(x0 + 1, rect.top() + 3, max(2.0, x1 - x0 - 2), rect.height() - 6)
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(blend(base, hl, 0.45 if i == self.current else (0.14 if i % 2 else 0.22)))
            p.drawRoundedRect(block, 4, 4)
            label = f"{turn.turn}  {turn.user_text}".strip()
            shown = block.intersected(rect)  # a block that starts left of the view: label where it shows
            room = int(shown.width() - 8)
            if room > fm.horizontalAdvance("00"):
                p.setPen(text)
                p.drawText(shown.adjusted(5, 0, -3, 0), Qt.AlignmentFlag.AlignVCenter,
                           fm.elidedText(label, Qt.TextElideMode.ElideRight, room))


def tick_step(span: float, width: float, min_px: float = 70) -> float:
    """The ruler's step: the smallest of 1, 2, 5, 10, 15, 30 s, 1, 2, 5 … min, 1 h … whose ticks
    stay at least `min_px` apart over `span` seconds drawn `width` pixels wide."""
    for step in (0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200, 86400):
        if step / max(span, 1e-3) * width >= min_px:
            return float(step)
    return max(86400.0, span / 10)  # never more than a few ticks


class RulerLane(TimeLane):
    """Time labels along the axis (m:ss)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("", 18, parent)

    def paint_content(self, p: QPainter, rect: QRectF) -> None:
        pal = self.palette()
        p.fillRect(rect, pal.color(QPalette.ColorRole.Window))
        p.setPen(pal.color(QPalette.ColorRole.PlaceholderText))
        v0, v1 = self.view
        step = tick_step(v1 - v0, self.span())
        t = np.ceil(v0 / step - 1e-9) * step
        while t <= v1 + 1e-6:
            x = self.x_of(t)
            p.drawLine(QPointF(x, rect.top()), QPointF(x, rect.top() + 4))
            label = clock_text(t) if step >= 1 or t == int(t) else f"{clock_text(t)}.5"
            if x + 3 + p.fontMetrics().horizontalAdvance(label) <= rect.right() + 8:  # never cut off
                p.drawText(QRectF(x + 3, rect.top(), 70, rect.height()), Qt.AlignmentFlag.AlignVCenter, label)
            t += step
