"""Small line icons drawn with QPainter (no icon files, no emoji font needed): the navigation
pages, the app icon, and a coloured dot per worker/slot state."""

from __future__ import annotations

from functools import lru_cache

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QIcon, QPainter, QPainterPath, QPen, QPixmap

SIZE = 64  # drawn large, scaled down by Qt; looks crisp at 16–32 px

STATE_COLORS = {
    "idle": "#2e9d57", "empty": "#9aa0a6", "busy": "#d9822b", "active": "#d9822b",
    "loading": "#3a7bd5", "error": "#d64541", "session": "#8e5cc7", "unreachable": "#d64541",
}


def _canvas() -> tuple[QPixmap, QPainter]:
    pix = QPixmap(SIZE, SIZE)
    pix.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pix)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    return pix, painter


def nav_icon(kind: str, color: QColor, selected: QColor | None = None) -> QIcon:
    """'chat' (speech bubble), 'call' (headset), 'recordings' (record button), 'admin' (bar chart), 'models' (a chip);
    drawn in `color`, and in `selected` for the selected state when given."""
    icon = QIcon(_draw(kind, color))
    if selected is not None:
        icon.addPixmap(_draw(kind, selected), QIcon.Mode.Selected)
    return icon


def _draw(kind: str, color: QColor) -> QPixmap:
    pix, p = _canvas()
    pen = QPen(color, 5.0, Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap, Qt.PenJoinStyle.RoundJoin)
    p.setPen(pen)
    if kind == "chat":
        path = QPainterPath()
        path.addRoundedRect(QRectF(8, 10, 48, 34), 10, 10)
        tail = QPainterPath()
        tail.moveTo(18, 42)
        tail.lineTo(14, 56)
        tail.lineTo(30, 43)
        p.drawPath(path.united(tail))
    elif kind == "call":
        p.drawArc(QRectF(10, 8, 44, 44), 0, 180 * 16)
        p.drawLine(QPointF(10, 30), QPointF(10, 40))
        p.drawLine(QPointF(54, 30), QPointF(54, 40))
        p.setBrush(color)
        p.drawRoundedRect(QRectF(7, 30, 10, 18), 3, 3)
        p.drawRoundedRect(QRectF(47, 30, 10, 18), 3, 3)
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.drawArc(QRectF(22, 38, 30, 18), 270 * 16, 90 * 16)
    elif kind == "recordings":
        p.drawEllipse(QRectF(8, 8, 48, 48))
        p.setBrush(color)
        p.drawEllipse(QRectF(22, 22, 20, 20))
    elif kind == "models":  # a chip: a square with pins
        p.drawRoundedRect(QRectF(16, 16, 32, 32), 4, 4)
        for x in (24, 32, 40):
            for y0, y1 in ((6, 16), (48, 58)):
                p.drawLine(QPointF(x, y0), QPointF(x, y1))
                p.drawLine(QPointF(y0, x), QPointF(y1, x))
    elif kind == "admin":
        for x, top in ((14, 34), (32, 14), (50, 26)):
            p.drawLine(QPointF(x, 54), QPointF(x, top))
        p.drawLine(QPointF(6, 58), QPointF(58, 58))
    p.end()
    return pix


@lru_cache(maxsize=32)
def state_dot(state: str) -> QIcon:
    """A filled circle in the state's colour (grey for unknown states)."""
    pix, p = _canvas()
    color = QColor(STATE_COLORS.get(state, "#9aa0a6"))
    p.setPen(Qt.PenStyle.NoPen)
    p.setBrush(color)
    p.drawEllipse(QRectF(16, 16, 32, 32))
    p.end()
    return QIcon(pix)


def app_icon() -> QIcon:
    """A rounded square with a speech bubble: the window and taskbar icon."""
    pix, p = _canvas()
    p.setPen(Qt.PenStyle.NoPen)
    p.setBrush(QColor("#3a6fd8"))
    p.drawRoundedRect(QRectF(2, 2, 60, 60), 14, 14)
    p.setBrush(QColor("white"))
    bubble = QPainterPath()
    bubble.addRoundedRect(QRectF(13, 15, 38, 26), 8, 8)
    tail = QPainterPath()
    tail.moveTo(20, 38)
    tail.lineTo(18, 50)
    tail.lineTo(31, 40)
    p.drawPath(bubble.united(tail))
    p.end()
    return QIcon(pix)
