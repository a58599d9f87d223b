"""A reply's Markdown as an HTML fragment for the recording transcript, rendered as the chat shows it
(GitHub dialect, no raw HTML, each line of a paragraph kept); images become their alt text, unloaded."""

from __future__ import annotations

import html
import re

from PySide6.QtGui import QTextCharFormat, QTextCursor, QTextDocument, QTextFormat

from desktop.ui.chat.markdown_view import MARKDOWN, break_lines
from desktop.ui.chat.soft_breaks import keep_line_breaks

_BODY = re.compile(r"<body[^>]*>(.*)</body>", re.DOTALL)
_PLAIN = re.compile(r"[\\`*_#>|\[\]<~!-]|^\s*\d+[.)]\s", re.MULTILINE)  # what can make Markdown of a text


def plain_html(text: str) -> str:
    """Plain text as HTML that keeps its line breaks."""
    return html.escape(text).replace("\r\n", "\n").replace("\n", "<br>")


def markdown_html(text: str) -> str:
    """`text` rendered as Markdown, as an HTML fragment (paragraphs, lists, code, tables)."""
    if not _PLAIN.search(text):
        return plain_html(text)  # nothing to render: no document needed
    doc = QTextDocument()
    doc.setMarkdown(keep_line_breaks(text), MARKDOWN)
    break_lines(doc)
    _unload_images(doc)
    m = _BODY.search(doc.toHtml())
    return m.group(1).strip() if m else plain_html(text)


def _unload_images(doc: QTextDocument) -> None:
    """Each image becomes "[image: its alt text]": a recording never loads a file or page."""
    cursor, block = QTextCursor(doc), doc.begin()
    while block.isValid():
        images = []
        it = block.begin()
        while not it.atEnd():
            frag = it.fragment()
            if frag.charFormat().isImageFormat():
                images.append((frag.position(), frag.length(), frag.charFormat()))
            it += 1
        for start, length, fmt in reversed(images):
            alt = str(fmt.property(QTextFormat.Property.ImageAltText) or "").strip()
            cursor.setPosition(start)
            cursor.setPosition(start + length, QTextCursor.MoveMode.KeepAnchor)
            cursor.insertText(f"[image: {alt}]" if alt else "[image]", QTextCharFormat())
        block = block.next()
