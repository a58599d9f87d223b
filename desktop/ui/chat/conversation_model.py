"""Qt list model of saved conversations (title, and when it was last used in the tooltip);
editing a title asks for a rename rather than changing the store itself."""

from __future__ import annotations

import time
from typing import Any, Sequence

from PySide6.QtCore import QAbstractListModel, QModelIndex, QPersistentModelIndex, Qt, Signal

from desktop.engine.conversations import Conversation

ID_ROLE = Qt.ItemDataRole.UserRole + 1
UNTITLED = "New conversation"
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


class ConversationListModel(QAbstractListModel):
    rename_requested = Signal(str, str)  # id, new title

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._rows: list[Conversation] = []

    def set_conversations(self, convs: Sequence[Conversation]) -> None:
        self.beginResetModel()
        self._rows = list(convs)
        self.endResetModel()

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
            return f"{conv.title or UNTITLED}\n{count} message{'s' * (count != 1)} · last used {when(conv.updated)}"
        if role == ID_ROLE:
            return conv.id
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
