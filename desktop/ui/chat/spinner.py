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


_cache: dict[tuple[int, int, int], QIcon] = {}


def spinner_icon(step: int) -> QIcon:
    """Frame `step` (of FRAMES, one turn): the arc in the highlight colour, in the highlighted-text
    colour when selected. Each frame is drawn once per palette, when first shown."""
    pal = QGuiApplication.palette()
    normal, selected = pal.color(QPalette.ColorRole.Highlight), pal.color(QPalette.ColorRole.HighlightedText)
    key = (normal.rgba(), selected.rgba(), step % FRAMES)
    icon = _cache.get(key)
    if icon is None:
        icon = _cache[key] = QIcon()
        icon.addPixmap(_frame(normal, key[2]), QIcon.Mode.Normal)
        icon.addPixmap(_frame(selected, key[2]), QIcon.Mode.Selected)
    return icon
