"""The line under the last reply when a limit cut it short (chat/reply_limit.py): which limit, what
to do, and Continue when the reply length limit cut it (Continue appends to the same reply). An
earlier reply says it in its badge only."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QWidget

from desktop.chat.reply_limit import Limit
from desktop.ui.style import muted, small_font


class LimitRow(QWidget):
    """Shown while it has a limit (`set_limit`) and the reply is the last (`set_last`); Continue
    is enabled while `set_can_continue` allows."""

    continue_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.limit: Limit | None = None
        self._can = self._last = False
        line = QHBoxLayout(self)
        line.setContentsMargins(0, 6, 0, 0)
        line.setSpacing(8)
        self.note = QLabel()
        self.note.setFont(small_font(self))
        self.note.setStyleSheet(f"color: {muted(self).name()}; font-style: italic;")
        self.note.setWordWrap(True)
        self.note.setTextFormat(Qt.TextFormat.PlainText)
        line.addWidget(self.note, 1)
        self.continue_button = QPushButton("Continue")
        self.continue_button.setToolTip("Go on writing this reply from where the limit stopped it")
        self.continue_button.clicked.connect(self.continue_requested)
        line.addWidget(self.continue_button, 0, Qt.AlignmentFlag.AlignTop)
        self.hide()

    def set_limit(self, limit: Limit | None) -> None:
        self.limit = limit
        self.note.setText(limit.sentence if limit is not None else "")
        self.note.setToolTip(limit.hint if limit is not None else "")
        self._sync()

    def set_last(self, last: bool, can_continue: bool) -> None:
        """Whether the reply is the last one, and whether Continue can be used now (a whole reply,
        nothing being written)."""
        self._last, self._can = last, can_continue
        self._sync()

    def _sync(self) -> None:
        self.setVisible(self.limit is not None and self._last)
        self.continue_button.setVisible(self.limit is not None and self.limit.can_continue)
        self.continue_button.setEnabled(self._can)
