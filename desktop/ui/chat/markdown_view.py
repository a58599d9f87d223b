"""A read-only text view that is exactly as tall as its text: Markdown (code blocks in a
monospace font on a subtle background; each line break of a paragraph kept, as in a chat) or plain
text; long lines, code too, wrap. It never loads
anything (no images, no pages) and never navigates; web and email links open after a confirmation."""

from __future__ import annotations

import math
import time

from typing import Any

from PySide6.QtCore import QByteArray, QSize, Qt, QTimer, QUrl
from PySide6.QtGui import (
    QColor, QPalette, QTextBlockFormat, QTextCharFormat, QTextCursor, QTextDocument, QTextFormat, QTextOption, QWheelEvent,
)
from PySide6.QtWidgets import QFrame, QSizePolicy, QTextBrowser, QTextEdit

from desktop.ui.chat import links
from desktop.ui.chat.soft_breaks import BREAK_MARK, LINE_BREAK, keep_line_breaks
from desktop.ui.style import mono_font, tint
from desktop.ui.plain import plain_tip

RENDER_EVERY_S = 0.05  # long texts re-render at most this often while streaming
# GitHub Markdown without raw HTML: a reply's "<img …>" or "<a …>" shows as the text it is
FOUND_BACKGROUND, FOUND_TEXT = QColor("#ffd54f"), QColor("#1a1a1a")  # a search's words, as browsers mark them
MARKDOWN = QTextDocument.MarkdownFeature.MarkdownDialectGitHub | QTextDocument.MarkdownFeature.MarkdownNoHTML


def _may_link(text: str) -> bool:
    """Whether Markdown may hold a link or an image ([x](y), <x:y>, a bare URL, www., an email)."""
    return "](" in text or "://" in text or "www." in text or "@" in text or ("<" in text and ":" in text)


class MarkdownView(QTextBrowser):
    """Set the text with `set_text`; `text()` is the source as given."""

    def __init__(self, markdown: bool = True, parent=None) -> None:
        super().__init__(parent)
        self._markdown, self._source, self._last_render = markdown, "", 0.0
        self._words: list[str] = []  # highlighted (see highlight)
        self._pending = QTimer(self, singleShot=True, timeout=self._render)
        self.setOpenLinks(False)  # a click never navigates this view (a file: link would replace the text)
        self.setOpenExternalLinks(False)
        self.anchorClicked.connect(self._link_clicked)
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
            self.document().setMarkdown(keep_line_breaks(self._source), MARKDOWN)
            self._break_lines()
            self._defuse()
            self._style_code()
        else:
            self.setPlainText(self._source)
        if self._words:
            self.highlight(self._words)
        self._fit()

    def highlight(self, words: list[str]) -> int:
        """Mark every occurrence of these words (any case) until the text changes or `[]`
        clears them; how many were marked."""
        self._words = list(words)
        fmt = QTextCharFormat()
        fmt.setBackground(FOUND_BACKGROUND)
        fmt.setForeground(FOUND_TEXT)
        marks = []
        doc = self.document()
        for word in self._words:
            found = doc.find(word)
            while not found.isNull():
                mark = QTextEdit.ExtraSelection()
                mark.cursor, mark.format = found, fmt
                marks.append(mark)
                found = doc.find(word, found)
        self.setExtraSelections(marks)
        return len(marks)

    def _break_lines(self) -> None:
        """Each BREAK_MARK with the space of the soft break after it becomes a line separator: a
        new line in the same paragraph (a Markdown hard break would start a spaced-out block)."""
        if "\n" not in self._source and "\r" not in self._source:
            return  # one line: nothing to break
        break_lines(self.document())

    def _defuse(self) -> None:
        """Links that may open keep their look and show their whole address on hover; any other
        link becomes plain text; an image becomes "[image: its alt text]" and is never loaded."""
        if not _may_link(self._source):
            return
        doc, cursor = self.document(), QTextCursor(self.document())
        block = doc.begin()
        while block.isValid():
            found = []
            it = block.begin()
            while not it.atEnd():
                frag = it.fragment()
                fmt = frag.charFormat()
                if fmt.isImageFormat() or fmt.isAnchor():
                    found.append((frag.position(), frag.length(), fmt))
                it += 1
            for start, length, fmt in reversed(found):  # from the end: an image's text shifts what follows
                cursor.setPosition(start)
                cursor.setPosition(start + length, QTextCursor.MoveMode.KeepAnchor)
                if fmt.isImageFormat():
                    alt = str(fmt.property(QTextFormat.Property.ImageAltText) or "").strip()
                    cursor.insertText(f"[image: {alt}]" if alt else "[image]", QTextCharFormat())
                elif fmt.isAnchor():
                    href = fmt.anchorHref()
                    if links.openable(QUrl(href)):
                        fmt.setToolTip(plain_tip(links.address(QUrl(href))))
                    else:
                        fmt.setAnchor(False)
                        fmt.clearProperty(QTextFormat.Property.AnchorHref)
                        fmt.clearForeground()
                        fmt.setFontUnderline(False)
                        fmt.setToolTip(plain_tip(f"Not a web or email link, so it does not open: {href}"))
                    cursor.setCharFormat(fmt)
            block = block.next()

    def _link_clicked(self, url: QUrl) -> None:
        links.confirm_open(self.window(), url)  # does nothing for a link that may not open

    def loadResource(self, kind: int, name: QUrl) -> Any:
        """Nothing is ever loaded into a reply: not images, style sheets nor pages, local or remote.
        An empty value, not None: on None, QTextDocument would read a local file itself."""
        return QByteArray()

    def doSetSource(self, name: QUrl, kind: QTextDocument.ResourceType = QTextDocument.ResourceType.UnknownResource) -> None:
        """Never navigate (backward/forward/home or a link would replace the text)."""

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


def break_lines(doc: QTextDocument) -> None:
    """In a document made from keep_line_breaks() text: each BREAK_MARK with the soft break's space
    after it becomes a line separator (a new line in the same paragraph), as one undo step."""
    edit = QTextCursor(doc)
    edit.beginEditBlock()
    found = doc.find(BREAK_MARK + " ")
    while not found.isNull():
        found.insertText(LINE_BREAK)
        found = doc.find(BREAK_MARK + " ", found)
    edit.endEditBlock()
