"""The scrolling column of messages of one conversation, plus the notice of a failed or stopped
turn at its end. It follows the newest text while the user is at the bottom.

A long conversation is drawn lazily: only its last PAGE messages get widgets when it opens, and
earlier ones are added a page at a time when the user scrolls to the top (or clicks "Show earlier
messages"), the text in sight staying where it was."""

from __future__ import annotations

from typing import Any, Sequence

from PySide6.QtCore import QPoint, Qt, QTimer, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QApplication, QFrame, QHBoxLayout, QLabel, QPushButton, QScrollArea, QVBoxLayout, QWidget,
)

from desktop.chat.conversations import INTERRUPTED, StoredMessage
from desktop.chat.branches import position
from desktop.ui.chat.message_widget import MessageWidget
from desktop.ui.chat.notice import TurnNotice
from desktop.ui.chat.window_view import WindowMark
from desktop.ui.style import CONTENT_MAX_WIDTH, muted

EMPTY_HINT = ("<p style='font-size:15pt'>Start a conversation</p>"
              "<p>Everything runs on this computer; nothing you write leaves it.<br>"
              "Enter sends · Shift+Enter starts a new line · Esc stops a reply</p>")
REVEAL_MARGIN = 24  # px above a message scrolled to
PAGE = 40  # messages drawn when a conversation opens, and added each time the user reaches the top
_FIRST_ROW = 3  # in the column's layout: stretch, empty hint, "Show earlier messages", then messages


class MessageView(QScrollArea):
    """Message actions re-emit with the message's index in its conversation. Indexes are the
    conversation's throughout (`count`, `widget_at`, `truncate`); `widgets()` are the messages
    drawn so far, the conversation's last ones."""

    edit_requested = Signal(int)
    regenerate_requested = Signal(int)
    replay_requested = Signal(int)
    continue_requested = Signal(int)
    version_requested = Signal(int, int)  # the message's index, the version to show
    retry_requested = Signal()
    copied = Signal()
    earlier_shown = Signal()  # earlier messages got their widgets (e.g. give them Replay)

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
        self._older: list[StoredMessage] = []  # the conversation's first messages, not drawn yet
        self._widgets: list[MessageWidget] = []  # the messages from len(self._older) on
        self._notice: TurnNotice | None = None
        self._busy = False
        self._words: list[str] = []  # highlighted in every message (a search's words)
        self.window_mark = WindowMark()  # above the first message the model still sees (after a slide)
        self.window_mark.hide()
        self._first_seen = 0
        self._hint = QLabel(EMPTY_HINT)
        self._hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self._hint.setWordWrap(True)
        self._hint.setStyleSheet(f"color: {muted(self).name()};")
        self.earlier_button = QPushButton()
        self.earlier_button.setFlat(True)
        self.earlier_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.earlier_button.setStyleSheet(f"color: {muted(self).name()};")
        self.earlier_button.clicked.connect(lambda: self.show_earlier())
        self.earlier_button.hide()
        self._list.insertWidget(0, self.earlier_button, 0, Qt.AlignmentFlag.AlignHCenter)
        self._list.insertWidget(0, self._hint)
        self._list.insertStretch(0, 1)  # with the one at the end: the empty hint sits in the middle
        self._follow = True
        # After earlier messages were added above: the widget that was on top, and how far below
        # the top of the view it was; kept there until the user scrolls (see _anchored).
        self._anchor: tuple[MessageWidget, int] | None = None
        bar = self.verticalScrollBar()
        bar.valueChanged.connect(self._scrolled)
        bar.rangeChanged.connect(self._range_changed)
        bar.actionTriggered.connect(self._user_scrolled)

    # ------------------------------------------------------------------ content

    def set_messages(self, messages: Sequence[StoredMessage]) -> None:
        """Show a conversation from the start (scrolled to its end): its last PAGE messages."""
        self.clear_notice()
        self.mark_first_seen(0)
        for widget in self._widgets:
            widget.setParent(None)
            widget.deleteLater()
        self._widgets, self._words, self._anchor = [], [], None
        cut = max(len(messages) - PAGE, 0)
        self._older = list(messages[:cut])
        for m in messages[cut:]:
            self.add(m)
        self._follow = True
        self._refresh()

    def mark_first_seen(self, index: int) -> None:
        """Put the divider above message `index`, the first the model still sees (0: none)."""
        self._first_seen = index
        self._list.removeWidget(self.window_mark)
        widget = self.widget_at(index) if index > 0 else None
        if widget is None:
            self.window_mark.hide()
            return
        self._list.insertWidget(self._list.indexOf(widget), self.window_mark)
        self.window_mark.show()

    def append(self, role: str, text: str, stats: dict[str, Any] | None = None, *,
               interrupted: bool = False, images: Sequence[str] = ()) -> MessageWidget:
        return self._push(self._build(role, text, self.count(), stats, interrupted, images))

    def _push(self, widget: MessageWidget) -> MessageWidget:
        """Put a new message's widget at the end: it is the last message now."""
        self._list.insertWidget(self._list.count() - 1 - (self._notice is not None), widget)
        if self._widgets:
            self._widgets[-1].set_can_regenerate(False)
        self._widgets.append(widget)
        widget.set_can_regenerate(True)
        self._follow, self._anchor = True, None
        self._refresh()
        return widget

    def truncate(self, count: int) -> None:
        """Keep the first `count` messages."""
        keep = max(count - len(self._older), 0)
        for widget in self._widgets[keep:]:
            widget.setParent(None)
            widget.deleteLater()
        del self._widgets[keep:]
        del self._older[count:]
        if self._widgets:
            self._widgets[-1].set_can_regenerate(True)
        self._anchor = None
        self._refresh()

    def show_from(self, index: int, messages: Sequence[StoredMessage]) -> None:
        """Redraw the messages from `index` on (after a reply ended and changed them)."""
        self.truncate(index)
        for m in messages[index:]:
            self.add(m)

    def add(self, m: StoredMessage) -> MessageWidget:
        """Show a saved message at the end (with its versions, a regenerated reply)."""
        return self._push(self._saved(m, self.count()))

    def show_earlier(self, down_to: int | None = None) -> int:
        """Draw the PAGE messages before the first one drawn (or all from message `down_to`, in one
        pass), above it, without moving what the user is reading; how many were added."""
        if not self._older:
            return 0
        cut = max(len(self._older) - PAGE, 0) if down_to is None else max(min(down_to, len(self._older)), 0)
        page, self._older = self._older[cut:], self._older[:cut]
        top = self._widgets[0] if self._widgets else None
        if top is not None:
            self._anchor = (top, self._y_of(top) - self.verticalScrollBar().value())
        built = []
        for i, m in enumerate(page):
            widget = self._saved(m, cut + i)
            widget.set_can_regenerate(False)
            self._list.insertWidget(_FIRST_ROW + i, widget)
            built.append(widget)
        self._widgets[:0] = built
        if self._first_seen:
            self.mark_first_seen(self._first_seen)  # its message may be drawn only now
        self._refresh()
        self.earlier_shown.emit()
        return len(built)

    def reveal(self, index: int) -> MessageWidget | None:
        """Draw the messages down from `index` if they are not yet, and scroll to that message."""
        if index < len(self._older):  # far up a long conversation this takes a moment
            QApplication.setOverrideCursor(Qt.CursorShape.WaitCursor)
            try:
                self.show_earlier(down_to=index)  # one pass: one layout refresh, one earlier_shown
            finally:
                QApplication.restoreOverrideCursor()
        widget = self.widget_at(index)
        if widget is not None:  # kept a little below the top while the layout settles
            self._follow, self._anchor = False, (widget, REVEAL_MARGIN)
            self._range_changed(0, self.verticalScrollBar().maximum())
        return widget

    def highlight(self, words: Sequence[str]) -> None:
        """Mark these words (any case) in every message, drawn now or later; [] clears."""
        self._words = [w for w in words if w]
        for widget in self._widgets:
            widget.body.highlight(self._words)

    def count(self) -> int:
        """How many messages the conversation shown has (drawn or not)."""
        return len(self._older) + len(self._widgets)

    def earlier_count(self) -> int:
        """How many of its first messages are not drawn yet."""
        return len(self._older)

    def widgets(self) -> list[MessageWidget]:
        """The messages drawn: the conversation's last `len(widgets())`."""
        return list(self._widgets)

    def widget_at(self, index: int) -> MessageWidget | None:
        """The widget of the conversation's message `index`, if it is drawn."""
        i = index - len(self._older)
        return self._widgets[i] if 0 <= i < len(self._widgets) else None

    def widget_for(self, request_id: str) -> MessageWidget | None:
        """The reply written by this request, if it is shown."""
        return next((w for w in reversed(self._widgets) if w.request_id == request_id), None)

    def plain_text(self) -> str:
        return "\n\n".join([m.content for m in self._older] + [w.text() for w in self._widgets])

    # ------------------------------------------------------------------ notice and state

    def show_notice(self, text: str, detail: str = "", *, error: bool, retry: bool) -> TurnNotice:
        self.clear_notice()
        self._notice = TurnNotice(text, detail, error=error, retry=retry)
        self._notice.retry_requested.connect(self.retry_requested)
        self._notice.retry_button.setEnabled(not self._busy)
        self._list.insertWidget(self._list.count() - 1, self._notice)
        self._follow, self._anchor = True, None
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

    # ------------------------------------------------------------------ internals

    def _build(self, role: str, text: str, index: int, stats: dict[str, Any] | None, interrupted: bool,
               images: Sequence[str]) -> MessageWidget:
        widget = MessageWidget(role, text, index, stats, interrupted=interrupted, images=images)
        widget.edit_requested.connect(self.edit_requested)
        widget.regenerate_requested.connect(self.regenerate_requested)
        widget.replay_requested.connect(self.replay_requested)
        widget.continue_requested.connect(self.continue_requested)
        widget.version_requested.connect(self.version_requested)
        widget.copied.connect(self.copied)
        widget.set_actions_enabled(not self._busy)
        if self._words:
            widget.body.highlight(self._words)
        return widget

    def _saved(self, m: StoredMessage, index: int) -> MessageWidget:
        """The widget of a saved message (with its versions, a regenerated reply)."""
        widget = self._build(m.role, m.content, index, m.stats, m.status == INTERRUPTED, m.images)
        widget.set_versions(*position(m))
        if widget.card is not None:
            widget.card.show_saved(m.call, m.content)
        return widget

    def _refresh(self) -> None:
        """The empty hint, and "Show earlier messages" while some are not drawn. Each message's
        own state is set once, when it is drawn or stops being the last (never all of them
        again: that made opening a long conversation quadratic)."""
        self._hint.setVisible(not self.count())
        self._list.setStretch(0, 0 if self.count() else 1)
        n = len(self._older)
        self.earlier_button.setVisible(n > 0)
        self.earlier_button.setText(f"Show earlier messages ({n:,} more)")

    def _y_of(self, widget: QWidget) -> int:
        return widget.mapTo(self.widget(), QPoint(0, 0)).y()

    def _anchored(self) -> int | None:
        """Where the anchor wants the scroll bar (within its range), if there is an anchor."""
        if self._anchor is None:
            return None
        widget, offset = self._anchor
        bar = self.verticalScrollBar()
        return min(max(self._y_of(widget) - offset, bar.minimum()), bar.maximum())

    def _range_changed(self, _lo: int, hi: int) -> None:
        bar, target = self.verticalScrollBar(), self._anchored()
        if target is not None:
            bar.setValue(target)
        elif self._follow:
            bar.setValue(hi)

    def _scrolled(self, value: int) -> None:
        bar = self.verticalScrollBar()
        if self._anchor is not None and value != self._anchored():
            self._anchor = None  # the user scrolled on
        self._follow = self._anchor is None and value >= bar.maximum() - 24

    def _user_scrolled(self, _action: int) -> None:
        """A scroll by the user (wheel, keys, the bar) that reaches the top draws a page more."""
        bar = self.verticalScrollBar()
        if self._older and bar.sliderPosition() <= bar.minimum():
            QTimer.singleShot(0, self.show_earlier)
