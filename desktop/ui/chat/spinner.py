"""A small busy spinner drawn in code (no image files, no icon font): the frames of a turning arc,
as icons whose selected form is drawn in the highlighted-text colour."""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QGuiApplication, QIcon, QPainter, QPalette, QPen, QPixmap

FRAMES = 12
SIZE = 32


def _frame(color: QColor, step: int) -> QPixmap:
    pix = QPixmap(SIZE, SIZE)
    pix.fill(Qt.GlobalColor.transparent)
    p = QPainter(pix)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    box = QRectF(5, 5, SIZE - 10, SIZE - 10)
    faint = QColor(color)
    faint.setAlphaF(0.25)
    p.setPen(QPen(faint, 4.0))
    p.drawEllipse(box)
    p.setPen(QPen(color, 4.0, Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap))
    p.drawArc(box, int(90 - step * 360 / FRAMES) * 16, -100 * 16)
    p.end()
    return pix


def spinner_frames() -> list[QIcon]:
    """FRAMES icons, one turn: the arc in the highlight colour (highlighted text when selected)."""
    pal = QGuiApplication.palette()
    normal, selected = pal.color(QPalette.ColorRole.Highlight), pal.color(QPalette.ColorRole.HighlightedText)
    icons = []
    for step in range(FRAMES):
        icon = QIcon()
        icon.addPixmap(_frame(normal, step), QIcon.Mode.Normal)
        icon.addPixmap(_frame(selected, step), QIcon.Mode.Selected)
        icons.append(icon)
    return icons
