"""Per-turn numbers of the call as a compact table: end of speech → first audio, the end-of-turn
wait, ASR time, TTFT, first sound, gaps and drift while it played, cached/new tokens —
one row per exchange, updated when the turn is reported again (played out, or cut)."""

from __future__ import annotations

import copy
from typing import Any, Callable

from PySide6.QtCore import QAbstractTableModel, QEvent, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QFont, QFontMetrics
from PySide6.QtWidgets import QHeaderView, QTableView, QWidget

from desktop.call.call import TurnMetrics
from desktop.ui.tables import read_only_style

Index = QModelIndex | QPersistentModelIndex


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f} ms"


def _gaps(m: TurnMetrics) -> str:
    if m.underruns is None:
        return "—"
    return "0" if not m.underruns else f"{m.underruns} · {(m.drift_ms or 0.0):,.0f} ms"


def _turn_end(m: TurnMetrics) -> str:
    """The end-of-turn wait; a star where a long silence decided instead of the model and your words."""
    if m.turn_end is None or m.decision_ms is None:
        return "—"
    return _ms(m.decision_ms) + ("*" if m.turn_end.by in ("fallback", "silence") else "")


def _tokens(value: int) -> str:
    return f"{value:,}"


# title, tooltip, cell text
COLUMNS: tuple[tuple[str, str, Callable[[TurnMetrics], str]], ...] = (
    ("Turn", "The exchange's number; “cut” when you talked over the reply",
     lambda m: f"{m.turn} · cut" if m.heard is not None else str(m.turn)),
    ("End → audio", "From the last sound of your voice to the first sound of the reply",
     lambda m: _ms(m.eos_to_audio_ms)),
    ("Decided", "From the last sound of your voice to the call deciding you had finished: the end-of-turn "
                 "model and your words (* when a silence decided instead)", _turn_end),
    ("ASR", "Speech recognition: from the turn's end to its final text (most of it is done while you speak)",
     lambda m: _ms(m.asr_ms)),
    ("TTFT", "Time to the reply's first token", lambda m: _ms(m.ttft_ms)),
    ("Voice", "First sound: from the reply's first words to their first sound (the voice's share)",
     lambda m: _ms(m.first_sound_ms)),
    ("Gaps", "Times the speaker ran dry while the reply played, and the silence they added "
             "(how much longer than its audio the reply took to play)",
     _gaps),
    ("Cached", "Tokens of the call reused from the KV cache, your words read while you spoke included",
     lambda m: _tokens(m.cached_tokens)),
    ("New", "Tokens the model read for this turn once you had finished (the call's KV cache then holds "
            "the cached and new tokens and the reply)", lambda m: _tokens(m.new_tokens)),
)


CELL_PAD = 22  # TABLE_CSS pads a cell 8 px each side; the rest is air, so a number never touches the next
TABLE_CSS = """
QHeaderView::section { padding: 4px 8px; border: none; border-bottom: 1px solid palette(mid);
                       background: palette(button); font-weight: bold; }
QTableView::item { padding: 0px 8px; }
"""


class MetricsModel(QAbstractTableModel):
    """Rows of TurnMetrics (copies: the call's own objects belong to its threads)."""

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self.rows: list[TurnMetrics] = []

    def add(self, metrics: TurnMetrics) -> None:
        row = copy.copy(metrics)
        for i, old in enumerate(self.rows):
            if old.turn == row.turn:
                self.rows[i] = row
                self.dataChanged.emit(self.index(i, 0), self.index(i, len(COLUMNS) - 1))
                return
        self.beginInsertRows(QModelIndex(), len(self.rows), len(self.rows))
        self.rows.append(row)
        self.endInsertRows()

    def clear(self) -> None:
        self.beginResetModel()
        self.rows.clear()
        self.endResetModel()

    def text(self, row: int, column: int) -> str:
        return COLUMNS[column][2](self.rows[row])

    def rowCount(self, parent: Index = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: Index = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(COLUMNS)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            return self.text(index.row(), index.column())
        if role == Qt.ItemDataRole.TextAlignmentRole:
            horizontal = Qt.AlignmentFlag.AlignLeft if index.column() == 0 else Qt.AlignmentFlag.AlignRight
            return horizontal | Qt.AlignmentFlag.AlignVCenter
        if role == Qt.ItemDataRole.ToolTipRole:
            m = self.rows[index.row()]
            return f"You: {m.user_text}" if m.user_text else None
        return None

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation != Qt.Orientation.Horizontal or not 0 <= section < len(COLUMNS):
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section][0]
        if role == Qt.ItemDataRole.ToolTipRole:
            return COLUMNS[section][1]
        if role == Qt.ItemDataRole.TextAlignmentRole:
            return Qt.AlignmentFlag.AlignLeft if section == 0 else Qt.AlignmentFlag.AlignRight
        return None


class MetricsTable(QTableView):
    """A read-only view of a MetricsModel that keeps the newest turn in sight. Each column is as
    wide as its header and its widest cell (measured here: the padding and bold header of
    TABLE_CSS are not in Qt's size hints, so contents-sized columns were elided), and the room
    left over is shared out evenly; only when even that does not fit does the table scroll sideways."""

    def __init__(self, model: MetricsModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setModel(model)
        self.setObjectName("callMetrics")
        self.setStyleSheet(TABLE_CSS)
        read_only_style(self, self.fontMetrics().height() + 8)
        self.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        header = self.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        header.setMinimumSectionSize(1)
        bold = QFont(self.font())
        bold.setBold(True)
        self._least = [QFontMetrics(bold).horizontalAdvance(title) for title, _, _ in COLUMNS]
        self._least[0] = max(self._least[0], self.fontMetrics().horizontalAdvance("888 · cut"))
        self._widths = list(self._least)
        self.setAccessibleName("Turn metrics")
        model.rowsInserted.connect(lambda _, first, last: self._measure(first, last))
        model.rowsInserted.connect(lambda *_: self.scrollToBottom())
        model.dataChanged.connect(lambda top, bottom, *_: self._measure(top.row(), bottom.row()))
        model.modelReset.connect(self._reset)
        self._fit()

    def natural_widths(self) -> list[int]:
        """Each column's width for its header and widest cell, padding included."""
        return [w + CELL_PAD for w in self._widths]

    def viewportEvent(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Resize:  # the window, or a vertical scroll bar came or went
            self._fit()
        return super().viewportEvent(event)

    def _measure(self, first: int, last: int) -> None:
        model, metrics = self.model(), self.fontMetrics()
        for row in range(first, last + 1):
            for column in range(len(COLUMNS)):
                self._widths[column] = max(self._widths[column], metrics.horizontalAdvance(model.text(row, column)))
        self._fit()

    def _reset(self) -> None:
        self._widths = list(self._least)
        self._fit()

    def _fit(self) -> None:
        widths = self.natural_widths()
        extra = max(self.viewport().width() - sum(widths), 0)
        share, rest = divmod(extra, len(widths))
        for column, width in enumerate(widths):
            self.setColumnWidth(column, width + share + (rest if column == len(widths) - 1 else 0))
