"""The recordings as a table (date, type, duration, size, title, first words) and the proxy that
sorts it by the real values and filters it by the search text (title and first words)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, QSortFilterProxyModel, Qt
from PySide6.QtGui import QFont

from desktop.recording.library import Summary
from desktop.safefile import human_size
from desktop.ui.recordings.format import clock_text, date_text, kind_text

Index = QModelIndex | QPersistentModelIndex
SORT_ROLE = Qt.ItemDataRole.UserRole + 1
SUMMARY_ROLE = Qt.ItemDataRole.UserRole + 2
COLUMNS = ("Date", "Type", "Duration", "Size", "Title", "First words")
DATE, KIND, DURATION, SIZE, TITLE, FIRST_WORDS = range(len(COLUMNS))


def title_of(s: Summary) -> str:
    return s.title or f"{kind_text(s.kind, s.video)} on {date_text(s.started_at)}"


class RecordingsModel(QAbstractTableModel):
    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self.rows: list[Summary] = []

    def set_rows(self, rows: list[Summary]) -> None:
        self.beginResetModel()
        self.rows = list(rows)
        self.endResetModel()

    def rowCount(self, parent: Index = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: Index = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        s, col = self.rows[index.row()], index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return (date_text(s.started_at), kind_text(s.kind, s.video),
                    clock_text(s.duration) + ("" if s.complete else " ⚠"), human_size(s.size),
                    title_of(s), s.first_words)[col]
        if role == SORT_ROLE:
            return (s.started_at, s.kind, s.duration, s.size, title_of(s).casefold(), s.first_words.casefold())[col]
        if role == SUMMARY_ROLE:
            return s
        if role == Qt.ItemDataRole.ToolTipRole:
            if col == DURATION and not s.complete:
                return "The app stopped before this recording ended; everything written until then is kept."
            if col in (TITLE, FIRST_WORDS):
                return s.first_words or None
        if role == Qt.ItemDataRole.FontRole and col == TITLE and not s.title:
            font = QFont()
            font.setItalic(True)  # a stand-in title, not one the recording has
            return font
        if role == Qt.ItemDataRole.TextAlignmentRole and col in (DURATION, SIZE):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None


class RecordingsFilter(QSortFilterProxyModel):
    """Sorts by SORT_ROLE; keeps the rows whose title or first words contain every word searched."""

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self.setSortRole(SORT_ROLE)
        self._words: list[str] = []

    def set_search(self, text: str) -> None:
        self.beginFilterChange()
        self._words = text.casefold().split()
        self.endFilterChange(QSortFilterProxyModel.Direction.Rows)

    def filterAcceptsRow(self, row: int, parent: Index) -> bool:
        if not self._words:
            return True
        model = self.sourceModel()
        s: Summary = model.data(model.index(row, 0, parent), SUMMARY_ROLE)
        haystack = f"{title_of(s)} {s.first_words}".casefold()
        return all(w in haystack for w in self._words)
