"""A read-only text view that is exactly as tall as its text: Markdown (code blocks in a
monospace font on a subtle background) or plain text; long lines, code too, wrap."""

from __future__ import annotations

import math
import time

from PySide6.QtCore import QSize, Qt, QTimer
from PySide6.QtGui import QPalette, QTextBlockFormat, QTextCharFormat, QTextCursor, QTextFormat, QTextOption, QWheelEvent
from PySide6.QtWidgets import QFrame, QSizePolicy, QTextBrowser

from desktop.ui.chat.style import mono_font, tint

RENDER_EVERY_S = 0.05  # long texts re-render at most this often while streaming


class MarkdownView(QTextBrowser):
    """Set the text with `set_text`; `text()` is the source as given."""

    def __init__(self, markdown: bool = True, parent=None) -> None:
        super().__init__(parent)
        self._markdown, self._source, self._last_render = markdown, "", 0.0
        self._pending = QTimer(self, singleShot=True, timeout=self._render)
        self.setOpenExternalLinks(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)  # long code lines too
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.viewport().setAutoFillBackground(False)
        pal = self.palette()
        pal.setColor(QPalette.ColorRole.Base, Qt.GlobalColor.transparent)
        self.setPalette(pal)
        self.setFocusPolicy(Qt.FocusPolicy.ClickFocus)
        self.document().setDocumentMargin(2)
        self.document().documentLayout().documentSizeChanged.connect(self._fit)

    def text(self) -> str:
        return self._source

    def set_text(self, text: str) -> None:
        """Show `text`. Short texts render at once; long ones at most every RENDER_EVERY_S so
        that a long streaming reply does not re-parse its whole Markdown for every token."""
        self._source = text
        wait = RENDER_EVERY_S - (time.monotonic() - self._last_render)
        if len(text) < 4000 or wait <= 0:
            self._render()
        elif not self._pending.isActive():
            self._pending.start(int(wait * 1000))

    def flush(self) -> None:
        """Render what is pending now (the end of a streamed reply)."""
        if self._pending.isActive():
            self._pending.stop()
            self._render()

    def _render(self) -> None:
        self._last_render = time.monotonic()
        if self._markdown:
            self.setMarkdown(self._source)
            self._style_code()
        else:
            self.setPlainText(self._source)
        self._fit()

    def _style_code(self) -> None:
        """Qt's Markdown import marks code with a fixed-pitch font; give it a background too."""
        doc, bg = self.document(), tint(self, 0.06)
        cursor = QTextCursor(doc)
        block = doc.begin()
        while block.isValid():
            fmt = block.blockFormat()
            if fmt.hasProperty(QTextFormat.Property.BlockCodeFence) or fmt.nonBreakableLines():
                cursor.setPosition(block.position())
                extra = QTextBlockFormat()
                extra.setBackground(bg)
                extra.setLeftMargin(6)
                extra.setNonBreakableLines(False)
                cursor.mergeBlockFormat(extra)
                mono = QTextCharFormat()
                mono.setFont(mono_font())
                cursor.setPosition(block.position() + max(block.length() - 1, 0), QTextCursor.MoveMode.KeepAnchor)
                cursor.mergeCharFormat(mono)
            else:
                it = block.begin()
                while not it.atEnd():
                    frag = it.fragment()
                    if frag.charFormat().fontFixedPitch():  # `inline code`
                        cursor.setPosition(frag.position())
                        cursor.setPosition(frag.position() + frag.length(), QTextCursor.MoveMode.KeepAnchor)
                        inline = QTextCharFormat()
                        inline.setBackground(tint(self, 0.09))
                        cursor.mergeCharFormat(inline)
                    it += 1
            block = block.next()

    def _fit(self, *_: object) -> None:
        self.setFixedHeight(math.ceil(self.document().size().height()) + 2 * self.frameWidth())

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._fit()

    def sizeHint(self) -> QSize:
        return QSize(400, self.height())

    def wheelEvent(self, event: QWheelEvent) -> None:
        event.ignore()  # scrolling belongs to the message list around us
