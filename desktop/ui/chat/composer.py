"""Where the user writes: Enter sends, Shift+Enter starts a new line, Esc stops a reply; Send
turns into Stop while a reply streams; images attach only when the model can see them."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QToolButton, QVBoxLayout, QWidget

from desktop.model.messages import MAX_CHARS
from desktop.ui import shortcuts
from desktop.ui.chat import dialogs
from desktop.ui.chat.style import accent, muted

NO_IMAGES_TIP = "This model takes text only — choose a vision model in Settings to attach images"
MAX_LINES = 8


def placeholder() -> str:
    """The empty text box's hint, with the keys of the shortcut table."""
    return f"Message the assistant  ({shortcuts.native('send')} to send, {shortcuts.native('newline')} for a new line)"


class ComposerEdit(QPlainTextEdit):
    """The text box: grows with its text up to MAX_LINES lines."""

    submit = Signal()
    escape = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setPlaceholderText(placeholder())
        self.setTabChangesFocus(True)
        self.document().contentsChanged.connect(self._fit)
        self._fit()

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

    def _fit(self) -> None:
        lines = min(max(int(self.document().size().height()), 1), MAX_LINES)
        line_h = self.fontMetrics().lineSpacing()
        margins = self.contentsMargins().top() + self.contentsMargins().bottom()
        self.setFixedHeight(lines * line_h + int(2 * self.document().documentMargin()) + margins + 4)


class Composer(QWidget):
    send_requested = Signal(str, list)  # text, image paths
    refused = Signal(str)  # why the text was not sent (it stays in the box)
    stop_requested = Signal()
    edit_cancelled = Signal()

    def __init__(self, supports_images: bool = False, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._streaming, self._images = False, []
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(4)
        self.edit_banner = QWidget()
        self.edit_banner.setObjectName("editBanner")
        self.edit_banner.setStyleSheet(f"QWidget#editBanner {{ background: {accent(self, 0.18).name()}; border-radius: 6px; }}")
        banner = QHBoxLayout(self.edit_banner)
        banner.setContentsMargins(10, 4, 4, 4)
        note = QLabel("Editing an earlier message — sending it starts a new branch; this conversation stays as it is.")
        banner.addWidget(note, 1)
        cancel = QPushButton("Cancel edit")
        cancel.clicked.connect(self.cancel_edit)
        banner.addWidget(cancel)
        self.edit_banner.hide()
        outer.addWidget(self.edit_banner)
        self.attachments = QLabel()
        self.attachments.setTextFormat(Qt.TextFormat.PlainText)  # file names, as they are
        self.attachments.setStyleSheet(f"color: {muted(self).name()};")
        self.attachments.hide()
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

    def set_supports_images(self, supports: bool) -> None:
        self.attach_button.setEnabled(supports)
        self.attach_button.setToolTip("Attach images" if supports else NO_IMAGES_TIP)
        if not supports:
            self._set_images([])

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

    def submit(self) -> None:
        """Send the text (nothing happens while a reply streams or when there is no text; text longer
        than any request may carry stays in the box, and `refused` says why)."""
        text = self.edit.toPlainText().strip()
        if self._streaming or not text:
            return
        if len(text) > MAX_CHARS:  # no model can take it; saved, it would only bloat the conversation
            self.refused.emit(f"This message is {len(text):,} characters long; no request may carry more "
                              f"than {MAX_CHARS:,}. Shorten it or send it in parts.")
            return
        self.edit.clear()
        images, self._images = self._images, []
        self._set_images([])
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
        self._set_images(self._images + dialogs.ask_images(self))

    def _set_images(self, paths: list[str]) -> None:
        self._images = paths
        self.attachments.setText("Attached: " + ", ".join(Path(p).name for p in paths))
        self.attachments.setVisible(bool(paths))
