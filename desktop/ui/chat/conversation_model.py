"""Qt list model of saved conversations: the title, the date it was last used, a detail line (the
text a search matched, else the message count) and the tooltip; editing a title asks for a rename
rather than changing the store itself."""

from __future__ import annotations

import time
from typing import Any, Sequence

from PySide6.QtCore import QAbstractListModel, QModelIndex, QPersistentModelIndex, Qt, QTimer, Signal

from desktop.chat.conversations import Conversation
from desktop.chat.search import Hit
from desktop.ui.chat.spinner import spinner_icon
from desktop.ui.plain import plain_tip

ID_ROLE = Qt.ItemDataRole.UserRole + 1
DETAIL_ROLE = Qt.ItemDataRole.UserRole + 2  # "6 messages", or while searching the matching text
DATE_ROLE = Qt.ItemDataRole.UserRole + 3  # "Today 14:32": when it was last used
UNTITLED = "New conversation"
SPIN_MS = 80  # a frame of the spinner of a conversation whose reply is being written
Index = QModelIndex | QPersistentModelIndex


def when(ts: float, now: float | None = None) -> str:
    """"just now", "5 min ago", "3 h ago", "yesterday", or a date."""
    age = (now if now is not None else time.time()) - ts
    if age < 60:
        return "just now"
    if age < 3600:
        return f"{age // 60:.0f} min ago"
    if age < 86400:
        return f"{age // 3600:.0f} h ago"
    if age < 2 * 86400:
        return "yesterday"
    return time.strftime("%d %b %Y", time.localtime(ts))


def list_date(ts: float, now: float | None = None) -> str:
    """A date that tells apart conversations of the same title: "Today 14:32", "Yesterday 09:05",
    "Mon 18:20" within a week, "12 Mar 14:32" this year, else "12 Mar 2024"."""
    now_t = time.localtime(now if now is not None else time.time())
    t = time.localtime(ts)
    days = (time.mktime((now_t.tm_year, now_t.tm_mon, now_t.tm_mday, 0, 0, 0, 0, 0, -1))
            - time.mktime((t.tm_year, t.tm_mon, t.tm_mday, 0, 0, 0, 0, 0, -1))) / 86400
    clock = time.strftime("%H:%M", t)
    if -0.5 < days < 0.5:
        return f"Today {clock}"
    if 0.5 <= days < 1.5:
        return f"Yesterday {clock}"
    if 0 < days < 6.5:
        return time.strftime("%a ", t) + clock
    if t.tm_year == now_t.tm_year:
        return time.strftime("%d %b ", t).lstrip("0") + clock
    return time.strftime("%d %b %Y", t).lstrip("0")


class ConversationListModel(QAbstractListModel):
    rename_requested = Signal(str, str)  # id, new title

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._rows: list[Conversation] = []
        self._hits: dict[str, Hit] = {}  # id → where a search matched its messages
        self._snippets: dict[str, str] = {}  # worked out for rows shown so far
        self._replying: dict[str, str] = {}  # id → what its reply is doing ("Replying…"), shown as its detail
        self._frame = 0
        self._spin = QTimer(self, interval=SPIN_MS, timeout=self._turn_spinner)

    def set_conversations(self, convs: Sequence[Conversation | Hit]) -> None:
        """Show these conversations (search hits: with the text that matched)."""
        self.beginResetModel()
        self._rows = [c.conv if isinstance(c, Hit) else c for c in convs]
        self._hits = {c.conv.id: c for c in convs if isinstance(c, Hit) and c.word}
        self._snippets = {}
        self.endResetModel()

    def set_replying(self, states: dict[str, str]) -> None:
        """The conversations whose reply is being written, each with a short line for its row
        (a spinner turns beside their titles); {} when none."""
        changed = set(states) ^ set(self._replying) | {k for k, v in states.items() if self._replying.get(k) != v}
        self._replying = dict(states)
        for conv_id in changed:
            self._changed(self.row_of(conv_id))
        if states and not self._spin.isActive():
            self._spin.start()
        elif not states:
            self._spin.stop()

    def replying(self, conv_id: str) -> str | None:
        return self._replying.get(conv_id)

    def _turn_spinner(self) -> None:
        self._frame += 1
        for conv_id in self._replying:
            self._changed(self.row_of(conv_id), [Qt.ItemDataRole.DecorationRole])

    def _changed(self, row: int, roles: list | None = None) -> None:
        if row >= 0:
            index = self.index(row, 0)
            self.dataChanged.emit(index, index, roles or [])

    def detail(self, conv: Conversation) -> str:
        """The second line of a row: what its reply is doing, the text a search matched, else the
        message count."""
        if conv.id in self._replying:
            return self._replying[conv.id]
        hit = self._hits.get(conv.id)
        if hit is not None and conv.id not in self._snippets:
            self._snippets[conv.id] = hit.snippet()
        count = len(conv.messages)
        return self._snippets.get(conv.id, "") or f"{count} message{'s' * (count != 1)}"

    def row_of(self, conv_id: str | None) -> int:
        return next((i for i, c in enumerate(self._rows) if c.id == conv_id), -1)

    def id_at(self, row: int) -> str | None:
        return self._rows[row].id if 0 <= row < len(self._rows) else None

    def rowCount(self, parent: Index = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self._rows)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self._rows):
            return None
        conv = self._rows[index.row()]
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.EditRole):
            return conv.title or UNTITLED
        if role == Qt.ItemDataRole.ToolTipRole:
            count = len(conv.messages)
            return plain_tip(f"{conv.title or UNTITLED}\n{count} message{'s' * (count != 1)} · last used {when(conv.updated)}")
        if role == ID_ROLE:
            return conv.id
        if role == DETAIL_ROLE:
            return self.detail(conv)
        if role == DATE_ROLE:
            return list_date(conv.updated)
        if role == Qt.ItemDataRole.DecorationRole and conv.id in self._replying:
            return spinner_icon(self._frame)
        return None

    def flags(self, index: Index) -> Qt.ItemFlag:
        return super().flags(index) | Qt.ItemFlag.ItemIsEditable if index.isValid() else Qt.ItemFlag.NoItemFlags

    def setData(self, index: Index, value: Any, role: int = Qt.ItemDataRole.EditRole) -> bool:
        if role != Qt.ItemDataRole.EditRole or not index.isValid():
            return False
        title = " ".join(str(value).split())
        conv = self._rows[index.row()]
        if not title or title == conv.title:
            return False
        self.rename_requested.emit(conv.id, title)
        return True
