"""The scrolling column of messages of one conversation, plus the notice of a failed or stopped
turn at its end. It follows the newest text while the user is at the bottom."""

from __future__ import annotations

from typing import Any, Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QScrollArea, QVBoxLayout, QWidget

from desktop.engine.conversations import INTERRUPTED, StoredMessage
from desktop.engine.branches import position
from desktop.ui.chat.message_widget import MessageWidget
from desktop.ui.chat.notice import TurnNotice
from desktop.ui.chat.style import CONTENT_MAX_WIDTH, muted

EMPTY_HINT = ("<p style='font-size:15pt'>Start a conversation</p>"
              "<p>Everything runs on this computer; nothing you write leaves it.<br>"
              "Enter sends · Shift+Enter starts a new line · Esc stops a reply</p>")


class MessageView(QScrollArea):
    """Message actions re-emit with the message's index."""

    edit_requested = Signal(int)
    regenerate_requested = Signal(int)
    replay_requested = Signal(int)
    continue_requested = Signal(int)
    version_requested = Signal(int, int)  # the message's index, the version to show
    retry_requested = Signal()
    copied = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.viewport().setBackgroundRole(QPalette.ColorRole.Base)
        self.viewport().setAutoFillBackground(True)
        outer = QWidget()
        row = QHBoxLayout(outer)
        row.setContentsMargins(16, 12, 16, 12)
        column = QWidget()
        column.setMaximumWidth(CONTENT_MAX_WIDTH)
        row.addWidget(column)
        self._list = QVBoxLayout(column)
        self._list.setContentsMargins(0, 0, 0, 0)
        self._list.setSpacing(10)
        self._list.addStretch(1)
        self.setWidget(outer)
        self._widgets: list[MessageWidget] = []
        self._notice: TurnNotice | None = None
        self._busy = False
        self._hint = QLabel(EMPTY_HINT)
        self._hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self._hint.setWordWrap(True)
        self._hint.setStyleSheet(f"color: {muted(self).name()};")
        self._list.insertWidget(0, self._hint)
        self._list.insertStretch(0, 1)  # with the one at the end: the empty hint sits in the middle
        self._follow = True
        bar = self.verticalScrollBar()
        bar.valueChanged.connect(lambda v: setattr(self, "_follow", v >= bar.maximum() - 24))
        bar.rangeChanged.connect(lambda _lo, hi: self._follow and bar.setValue(hi))

    # ------------------------------------------------------------------ content

    def set_messages(self, messages: Sequence[StoredMessage]) -> None:
        """Show a conversation from the start (scrolled to its end)."""
        self.clear_notice()
        for widget in self._widgets:
            widget.setParent(None)
            widget.deleteLater()
        self._widgets = []
        for m in messages:
            self.add(m)
        self._follow = True
        self._refresh()

    def append(self, role: str, text: str, stats: dict[str, Any] | None = None, *,
               interrupted: bool = False, images: Sequence[str] = ()) -> MessageWidget:
        widget = MessageWidget(role, text, len(self._widgets), stats, interrupted=interrupted, images=images)
        widget.edit_requested.connect(self.edit_requested)
        widget.regenerate_requested.connect(self.regenerate_requested)
        widget.replay_requested.connect(self.replay_requested)
        widget.continue_requested.connect(self.continue_requested)
        widget.version_requested.connect(self.version_requested)
        widget.copied.connect(self.copied)
        self._list.insertWidget(self._list.count() - 1 - (self._notice is not None), widget)
        self._widgets.append(widget)
        self._follow = True
        self._refresh()
        return widget

    def truncate(self, count: int) -> None:
        """Keep the first `count` messages."""
        for widget in self._widgets[count:]:
            widget.setParent(None)
            widget.deleteLater()
        del self._widgets[count:]
        self._refresh()

    def show_from(self, index: int, messages: Sequence[StoredMessage]) -> None:
        """Redraw the messages from `index` on (after a reply ended and changed them)."""
        self.truncate(index)
        for m in messages[index:]:
            self.add(m)

    def add(self, m: StoredMessage) -> MessageWidget:
        """Show a saved message at the end (with its versions, a regenerated reply; its branches, an
        edited message)."""
        widget = self.append(m.role, m.content, m.stats, interrupted=m.status == INTERRUPTED, images=m.images)
        widget.set_versions(*position(m))
        return widget

    def widgets(self) -> list[MessageWidget]:
        return list(self._widgets)

    def widget_for(self, request_id: str) -> MessageWidget | None:
        """The reply written by this request, if it is shown."""
        return next((w for w in reversed(self._widgets) if w.request_id == request_id), None)

    def plain_text(self) -> str:
        return "\n\n".join(w.text() for w in self._widgets)

    # ------------------------------------------------------------------ notice and state

    def show_notice(self, text: str, detail: str = "", *, error: bool, retry: bool) -> TurnNotice:
        self.clear_notice()
        self._notice = TurnNotice(text, detail, error=error, retry=retry)
        self._notice.retry_requested.connect(self.retry_requested)
        self._notice.retry_button.setEnabled(not self._busy)
        self._list.insertWidget(self._list.count() - 1, self._notice)
        self._follow = True
        return self._notice

    def notice(self) -> TurnNotice | None:
        return self._notice

    def clear_notice(self) -> None:
        if self._notice is not None:
            self._notice.setParent(None)
            self._notice.deleteLater()
            self._notice = None

    def set_busy(self, busy: bool) -> None:
        """While a reply streams, Edit, Regenerate and Retry wait."""
        self._busy = busy
        for widget in self._widgets:
            widget.set_actions_enabled(not busy)
        if self._notice is not None:
            self._notice.retry_button.setEnabled(not busy)

    def _refresh(self) -> None:
        self._hint.setVisible(not self._widgets)
        self._list.setStretch(0, 0 if self._widgets else 1)
        last = len(self._widgets) - 1
        for i, widget in enumerate(self._widgets):
            widget.set_can_regenerate(i == last)
            widget.set_actions_enabled(not self._busy)
