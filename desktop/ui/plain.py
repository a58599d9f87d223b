"""Show text the user typed or received as text, never as markup: Qt guesses that a label, message
box or tooltip holds HTML when it starts with something tag-like, so such text is pinned here."""

from __future__ import annotations

import html

from PySide6.QtGui import Qt
from PySide6.QtWidgets import QLabel, QMessageBox


def plain(widget: QLabel | QMessageBox) -> QLabel | QMessageBox:
    """Make a label or message box show its text literally (Qt.PlainText); returns it."""
    widget.setTextFormat(Qt.TextFormat.PlainText)
    return widget


def plain_tip(text: str) -> str:
    """A tooltip that shows `text` literally. Tooltips have no text format of their own: text
    that looks like HTML is escaped (line breaks kept); other text is returned as it is."""
    if not text or not Qt.mightBeRichText(text):
        return text
    return f"<p style='white-space:pre-wrap'>{html.escape(text)}</p>"


def html_text(text: str) -> str:
    """`text` escaped for a place that shows HTML (a label composed with <b> and the like)."""
    return html.escape(text, quote=False)
