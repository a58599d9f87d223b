"""Where the user writes: Enter sends, Shift+Enter starts a new line, Esc stops a reply; Send
turns into Stop while a reply streams; images attach only when the model can see them — by the
Attach button, by dropping files or images on the composer, or by pasting — and show as
thumbnails until sent. A refused image (not an image, too large, too many, a model that cannot
see images) is said why through `refused`; the text in the box is never lost."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QMimeData, Qt, Signal
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QImage, QKeyEvent, QResizeEvent
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QToolButton, QVBoxLayout, QWidget

from desktop.errors import InvalidRequest
from desktop.model.images import ImageData, read_image
from desktop.model.messages import MAX_CHARS
from desktop.ui import shortcuts
from desktop.ui.chat import dialogs
from desktop.ui.style import accent, muted
from desktop.ui.chat.thumbnails import ThumbnailStrip

NO_IMAGES_TIP = "This model takes text only — choose a vision model in Settings to attach images"
NO_IMAGES = "The current model cannot see images; choose a vision model in Settings to send them. Your text is kept."
MAX_LINES = 8
MAX_ATTACHED = 4  # images per message
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".gif")


def has_images(mime: QMimeData) -> bool:
    """Whether pasted or dropped data carries an image (image data, or local files that are images)."""
    if mime.hasImage():
        return True
    return any(url.isLocalFile() and url.toLocalFile().lower().endswith(IMAGE_SUFFIXES) for url in mime.urls())


def images_of(mime: QMimeData) -> list[tuple[str, bytes | None, str | None]]:
    """(name, bytes, file path) of each image in pasted or dropped data: local files by path,
    image data (a screenshot on the clipboard) as PNG bytes."""
    files = [url.toLocalFile() for url in mime.urls() if url.isLocalFile()]
    if files:
        return [(Path(f).name, None, f) for f in files]
    image = mime.imageData()
    if isinstance(image, QImage) and not image.isNull():
        data = QByteArray()
        buf = QBuffer(data)
        buf.open(QIODevice.OpenModeFlag.WriteOnly)
        image.save(buf, "PNG")
        return [("pasted image.png", bytes(data.data()), None)]
    return []


SHORT_PLACEHOLDER = "Message the assistant"


def placeholder() -> str:
    """The empty text box's hint, with the keys of the shortcut table."""
    return f"{SHORT_PLACEHOLDER}  ({shortcuts.native('send')} to send, {shortcuts.native('newline')} for a new line)"


class ComposerEdit(QPlainTextEdit):
    """The text box: grows with its text up to MAX_LINES lines."""

    submit = Signal()
    escape = Signal()
    images_given = Signal(QMimeData)  # images pasted or dropped on the text box (not inserted as text)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setPlaceholderText(placeholder())
        self.setTabChangesFocus(True)
        self.document().contentsChanged.connect(self._fit)
        self._fit()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        # The hint is one line: with the keys when they fit, else without (cut, it wrapped out of sight).
        room = self.viewport().width() - 2 * int(self.document().documentMargin()) - 4
        full = placeholder()
        self.setPlaceholderText(full if self.fontMetrics().horizontalAdvance(full) <= room else SHORT_PLACEHOLDER)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if shortcuts.matches(event, "newline"):
            self.insertPlainText("\n")
            return
        if shortcuts.matches(event, "send"):
            self.submit.emit()
            return
        if shortcuts.matches(event, "stop"):
            self.escape.emit()
            return
        super().keyPressEvent(event)

    def canInsertFromMimeData(self, source: QMimeData) -> bool:
        return has_images(source) or super().canInsertFromMimeData(source)

    def insertFromMimeData(self, source: QMimeData) -> None:
        if has_images(source):
            self.images_given.emit(source)
        else:
            super().insertFromMimeData(source)

    def _fit(self) -> None:
        lines = min(max(int(self.document().size().height()), 1), MAX_LINES)
        line_h = self.fontMetrics().lineSpacing()
        margins = self.contentsMargins().top() + self.contentsMargins().bottom()
        self.setFixedHeight(lines * line_h + int(2 * self.document().documentMargin()) + margins + 4)


class Composer(QWidget):
    send_requested = Signal(str, list)  # text, images (ImageData, checked)
    refused = Signal(str)  # why the text was not sent (it stays in the box)
    stop_requested = Signal()
    edit_cancelled = Signal()

    def __init__(self, supports_images: bool = False, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._streaming, self._images, self._supports = False, [], supports_images
        self._names: list[str] = []
        self.setAcceptDrops(True)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(4)
        self.edit_banner = QWidget()
        self.edit_banner.setObjectName("editBanner")
        self.edit_banner.setStyleSheet(f"QWidget#editBanner {{ background: {accent(self, 0.18).name()}; border-radius: 6px; }}")
        banner = QHBoxLayout(self.edit_banner)
        banner.setContentsMargins(10, 4, 4, 4)
        note = QLabel("Editing an earlier message — sending it starts a new branch; ‹ › on the message switches back.")
        note.setWordWrap(True)  # else its width becomes the page's minimum and the list beside it shrinks
        banner.addWidget(note, 1)
        cancel = QPushButton("Cancel edit")
        cancel.clicked.connect(self.cancel_edit)
        banner.addWidget(cancel)
        self.edit_banner.hide()
        outer.addWidget(self.edit_banner)
        self.attachments = ThumbnailStrip(removable=True)
        self.attachments.removed.connect(self.remove_image)
        outer.addWidget(self.attachments)

        row = self._row = QHBoxLayout()
        row.setSpacing(6)
        self.attach_button = QToolButton()
        self.attach_button.setText("Attach")
        self.attach_button.clicked.connect(self._attach)
        row.addWidget(self.attach_button, 0, Qt.AlignmentFlag.AlignBottom)
        self.edit = ComposerEdit()
        self.edit.submit.connect(self.submit)
        self.edit.escape.connect(self._escape)
        self.edit.images_given.connect(self.add_from_mime)
        row.addWidget(self.edit, 1)
        self.send_button = QPushButton("Send")
        self.send_button.setDefault(True)
        self.send_button.setMinimumWidth(76)
        self.send_button.clicked.connect(self._send_or_stop)
        row.addWidget(self.send_button, 0, Qt.AlignmentFlag.AlignBottom)
        outer.addLayout(row)
        self.set_supports_images(supports_images)

    # ------------------------------------------------------------------ state

    @property
    def editing(self) -> bool:
        return not self.edit_banner.isHidden()

    def set_streaming(self, streaming: bool) -> None:
        self._streaming = streaming
        self.send_button.setText("Stop" if streaming else "Send")
        self.send_button.setToolTip(f"Stop the reply ({shortcuts.native('stop')}); what was written so far is kept"
                                    if streaming else f"Send ({shortcuts.native('send')})")

    def add_tool(self, widget: QWidget) -> None:
        """Put a button (e.g. the voice toggle) in the row, just before Send."""
        self._row.insertWidget(self._row.indexOf(self.send_button), widget, 0, Qt.AlignmentFlag.AlignBottom)

    @property
    def images(self) -> list[ImageData]:
        return list(self._images)

    def set_supports_images(self, supports: bool) -> None:
        self._supports = supports
        self.attach_button.setEnabled(supports)
        self.attach_button.setToolTip("Attach images (or drop or paste them here)" if supports else NO_IMAGES_TIP)
        if not supports and self._images:
            self._set_images([], [])
            self.refused.emit("The current model cannot see images, so the attached images were removed. Your text is kept.")

    def start_edit(self, text: str) -> None:
        self.edit.setPlainText(text)
        self.edit_banner.show()
        self.edit.setFocus()
        self.edit.moveCursor(self.edit.textCursor().MoveOperation.End)

    def cancel_edit(self) -> None:
        if not self.edit_banner.isHidden():
            self.edit_banner.hide()
            self.edit.clear()
            self.edit_cancelled.emit()

    def end_edit(self) -> None:
        self.edit_banner.hide()

    # ------------------------------------------------------------------ actions

    def draft(self) -> str:
        """The text being typed as Send would send it ("" when Send would refuse it: too long)."""
        text = self.edit.toPlainText().strip()
        return text if len(text) <= MAX_CHARS else ""

    def submit(self) -> None:
        """Send the text (nothing happens while a reply streams or when there is no text; text longer
        than any request may carry stays in the box, and `refused` says why)."""
        text = self.edit.toPlainText().strip()
        if self._streaming or not (text or self._images):
            return
        if len(text) > MAX_CHARS:  # no model can take it; saved, it would only bloat the conversation
            self.refused.emit(f"This message is {len(text):,} characters long; no request may carry more "
                              f"than {MAX_CHARS:,}. Shorten it or send it in parts.")
            return
        self.edit.clear()
        images = self._images
        self._set_images([], [])
        self.send_requested.emit(text, images)

    def _send_or_stop(self) -> None:
        if self._streaming:
            self.stop_requested.emit()
        else:
            self.submit()

    def _escape(self) -> None:
        if self._streaming:
            self.stop_requested.emit()
        else:
            self.cancel_edit()

    def _attach(self) -> None:
        self.add_images([(Path(p).name, None, p) for p in dialogs.ask_images(self)])

    def add_from_mime(self, mime: QMimeData) -> None:
        self.add_images(images_of(mime))

    def add_images(self, items: list[tuple[str, bytes | None, str | None]]) -> int:
        """Attach images given as (name, bytes, path); each is checked, and the first refusal says
        why. Returns how many were attached."""
        if not items:
            return 0
        if not self._supports:
            self.refused.emit(NO_IMAGES)
            return 0
        images, names, problem = list(self._images), list(self._names), ""
        for name, data, path in items:
            if len(images) >= MAX_ATTACHED:
                problem = problem or f"A message can carry at most {MAX_ATTACHED} images; {name} was not attached."
                break
            try:
                image = read_image(path, "The image") if path else ImageData.from_bytes(data or b"", f"The image {name}")
            except InvalidRequest as exc:
                problem = problem or exc.message
                continue
            if image not in images:
                images.append(image)
                names.append(name)
        added = len(images) - len(self._images)
        self._set_images(images, names)
        if problem:
            self.refused.emit(problem)
        return added

    def remove_image(self, index: int) -> None:
        if 0 <= index < len(self._images):
            self._set_images(self._images[:index] + self._images[index + 1 :], self._names[:index] + self._names[index + 1 :])

    def _set_images(self, images: list[ImageData], names: list[str]) -> None:
        self._images, self._names = images, names
        self.attachments.set_images([(n, im.data, None) for n, im in zip(names, images)])

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if has_images(event.mimeData()):
            event.acceptProposedAction()
        else:
            super().dragEnterEvent(event)

    def dropEvent(self, event: QDropEvent) -> None:
        if has_images(event.mimeData()):
            event.acceptProposedAction()
            self.add_from_mime(event.mimeData())
        else:
            super().dropEvent(event)
