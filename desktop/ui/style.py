"""Colours and fonts of the pages (chat, call, recordings), derived from the application palette so
that light and dark themes both read well (no hard-coded colours; style sheets would skew widget
palettes)."""

from __future__ import annotations

from PySide6.QtGui import QColor, QFont, QFontDatabase, QGuiApplication, QPalette
from PySide6.QtWidgets import QWidget

CONTENT_MAX_WIDTH = 820  # messages beyond this width get hard to read on wide windows


def blend(a: QColor, b: QColor, t: float) -> QColor:
    """`a` moved a fraction `t` towards `b`."""
    return QColor.fromRgbF(a.redF() + (b.redF() - a.redF()) * t, a.greenF() + (b.greenF() - a.greenF()) * t,
                           a.blueF() + (b.blueF() - a.blueF()) * t)


def _palette() -> QPalette:
    return QGuiApplication.palette()


def tint(_widget: QWidget | None, t: float) -> QColor:
    """A subtle background: the base colour moved `t` towards the text colour."""
    pal = _palette()
    return blend(pal.color(QPalette.ColorRole.Base), pal.color(QPalette.ColorRole.Text), t)


def muted(_widget: QWidget | None = None) -> QColor:
    """Secondary text (badges, hints): readable, but quieter than the body text."""
    pal = _palette()
    return blend(pal.color(QPalette.ColorRole.Text), pal.color(QPalette.ColorRole.Base), 0.42)


def accent(_widget: QWidget | None = None, t: float = 0.12) -> QColor:
    """A light wash of the highlight colour (the user's messages)."""
    pal = _palette()
    return blend(pal.color(QPalette.ColorRole.Base), pal.color(QPalette.ColorRole.Highlight), t)


def wash(color: QColor, t: float) -> QColor:
    """The base colour moved `t` towards `color` (banners, notices)."""
    return blend(_palette().color(QPalette.ColorRole.Base), color, t)


def base() -> QColor:
    return _palette().color(QPalette.ColorRole.Base)


def mono_font() -> QFont:
    return QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)


def small_font(widget: QWidget, delta: float = -1.0) -> QFont:
    font = QFont(widget.font())
    font.setPointSizeF(max(font.pointSizeF() + delta, 7.0))
    return font
