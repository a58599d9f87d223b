"""The recordings as a table (date, type, duration, size, title, first words) and the proxy that
sorts it by the real values and filters it by the search text (title and first words). A recording
being made now reads "● Recording" (a call's time ticks on: `tick()`, every second while shown),
one the app stopped during is marked ⚠."""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, QSortFilterProxyModel, Qt
from PySide6.QtGui import QColor, QFont

from desktop.recording.chat_hook import IDLE_CLOSE_S
from desktop.recording.library import Summary
from desktop.safefile import human_size
from desktop.ui.recordings.format import clock_text, date_text, kind_text

log = logging.getLogger(__name__)
Index = QModelIndex | QPersistentModelIndex
DAMAGED = "⚠ damaged"  # a cell whose value could not be shown
SORT_ROLE = Qt.ItemDataRole.UserRole + 1
SUMMARY_ROLE = Qt.ItemDataRole.UserRole + 2
COLUMNS = ("Date", "Type", "Duration", "Size", "Title", "First words")
DATE, KIND, DURATION, SIZE, TITLE, FIRST_WORDS = range(len(COLUMNS))
LIVE_COLOR = QColor("#d23c3c")  # the red of a recording light: readable on light and dark
CUT_SHORT_TIP = "The app stopped before this recording ended; everything written until then is kept."


def title_of(s: Summary) -> str:
    return s.title or f"{kind_text(s.kind, s.video)} on {date_text(s.started_at)}"


def so_far(s: Summary, now: float) -> float:
    """A live recording's length now: a call records without pause, so its time since it started;
    a chat's is its messages' span (it grows with each message, not while nobody writes)."""
    return max(s.duration, now - s.started_at) if s.kind == "call" else s.duration


def duration_text(s: Summary, now: float) -> str:
    if s.damaged:
        return f"{clock_text(s.duration)} {DAMAGED}"
    if s.live:
        return f"● Recording · {clock_text(so_far(s, now))}"
    return clock_text(s.duration) + ("" if s.complete else " ⚠")


def duration_tip(s: Summary, now: float) -> str | None:
    if s.damaged:
        return f"This recording is damaged ({s.damaged}); what can be read of it still opens."
    if s.live:
        ends = ("when the call ends" if s.kind == "call" else
                f"after {int(IDLE_CLOSE_S // 60)} minutes without a new message, or when Omnidesk closes")
        return (f"Still being recorded: {clock_text(so_far(s, now))} so far. It ends {ends}; "
                "you can open it now to see what it has so far.")
    return None if s.complete else CUT_SHORT_TIP


class RecordingsModel(QAbstractTableModel):
    """`clock`: epoch seconds now (a live call's time is counted from its start)."""

    def __init__(self, parent: Any = None, clock: Callable[[], float] = time.time) -> None:
        super().__init__(parent)
        self.rows: list[Summary] = []
        self.clock = clock
        self.failures = 0  # exceptions caught in data()/headerData() (the first one is logged)

    def set_rows(self, rows: list[Summary]) -> None:
        self.beginResetModel()
        self.rows = list(rows)
        self.endResetModel()

    def tick(self) -> None:
        """Repaint the live calls' time."""
        for r, s in enumerate(self.rows):
            if s.live and s.kind == "call":
                cell = self.index(r, DURATION)
                self.dataChanged.emit(cell, cell, [Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole])

    def rowCount(self, parent: Index = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: Index = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        try:
            if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
                return COLUMNS[section]
        except Exception as exc:  # never into Qt: PySide turns it into a crash of the whole app
            self.failed(exc, f"header {section}")
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        """The cell's value; a value that cannot be shown reads DAMAGED (never an exception)."""
        try:
            return self._data(index, role)
        except Exception as exc:  # never into Qt: PySide turns it into a crash of the whole app
            self.failed(exc, f"row {index.row()}, column {index.column()}")
            return DAMAGED if role == Qt.ItemDataRole.DisplayRole else None

    def failed(self, exc: Exception, where: str) -> None:
        """Count a caught exception; log the first one (a damaged row is asked for on every paint)."""
        self.failures += 1
        if self.failures == 1:
            log.error("Recordings list: a cell could not be shown (%s); it reads %r", where, DAMAGED, exc_info=exc)

    def _data(self, index: Index, role: int) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self.rows):
            return None
        s, col = self.rows[index.row()], index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return (date_text(s.started_at), kind_text(s.kind, s.video),
                    duration_text(s, self.clock()), human_size(s.size),
                    title_of(s), s.first_words)[col]
        if role == SORT_ROLE:
            return (s.started_at, s.kind, s.duration, s.size, title_of(s).casefold(), s.first_words.casefold())[col]
        if role == SUMMARY_ROLE:
            return s
        if role == Qt.ItemDataRole.ToolTipRole:
            if col == DURATION:
                return duration_tip(s, self.clock())
            if col in (TITLE, FIRST_WORDS):
                return s.first_words or None
        if role == Qt.ItemDataRole.ForegroundRole and col == DURATION and s.live:
            return LIVE_COLOR
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
        try:
            s: Summary = model.data(model.index(row, 0, parent), SUMMARY_ROLE)
            haystack = f"{title_of(s)} {s.first_words}".casefold()
        except Exception:  # never into Qt (see RecordingsModel.data); the row stays listed
            log.debug("Recordings search: row %d could not be read", row, exc_info=True)
            return True
        return all(w in haystack for w in self._words)
