"""A line inside the Call page for what went wrong (an error event, a call that could not start)
or how the last call ended; never a modal dialog, closed with ×."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QToolButton, QWidget

from desktop.ui.style import muted, wash

ERROR_EDGE = QColor("#d9534f")


class CallNotice(QFrame):
    """`show_error(text)`, `show_info(text)`, `clear()`; `text` and `error` say what is shown."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("callNotice")
        self.error = False
        layout = QHBoxLayout(self)
        layout.setContentsMargins(12, 6, 6, 6)
        self.label = QLabel()
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        close = QToolButton()
        close.setText("×")
        close.setAutoRaise(True)
        close.setToolTip("Close")
        close.clicked.connect(self.clear)
        layout.addWidget(self.label, 1)
        layout.addWidget(close, 0, Qt.AlignmentFlag.AlignTop)
        self.hide()

    @property
    def text(self) -> str:
        return "" if self.isHidden() else self.label.text()

    def show_error(self, text: str) -> None:
        self._show(text, True)

    def show_info(self, text: str) -> None:
        self._show(text, False)

    def clear(self) -> None:
        self.label.clear()
        self.hide()

    def _show(self, text: str, error: bool) -> None:
        self.error = error
        edge = ERROR_EDGE if error else muted(self)
        self.setStyleSheet(f"QFrame#callNotice {{ background: {wash(edge, 0.12).name()}; "
                           f"border-left: 3px solid {edge.name()}; border-radius: 4px; }}")
        self.label.setText(text)
        self.show()
