"""The title at the top left of a page (Admin, Recordings): one size and weight for all of them."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel

SCALE = 1.4  # of the window's font


def page_title(text: str) -> QLabel:
    label = QLabel(text)
    font = label.font()
    font.setPointSizeF(font.pointSizeF() * SCALE)
    font.setBold(True)
    label.setFont(font)
    return label
