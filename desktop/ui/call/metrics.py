"""Per-turn numbers of the call as a compact table: end of speech → first audio, ASR time,
TTFT, first sound, gaps and drift while it played, cached/new tokens and the session's KV size —
one row per exchange, updated when the turn is reported again (played out, or cut)."""

from __future__ import annotations

import copy
from typing import Any, Callable

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QFont, QFontMetrics
from PySide6.QtWidgets import QHeaderView, QTableView, QWidget

from desktop.engine.call import TurnMetrics
from desktop.ui.tables import read_only_style

Index = QModelIndex | QPersistentModelIndex


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f} ms"


def _tokens(value: int) -> str:
    return f"{value:,}"


# title, tooltip, cell text
COLUMNS: tuple[tuple[str, str, Callable[[TurnMetrics], str]], ...] = (
    ("Turn", "The exchange's number; “cut” when you talked over the reply",
     lambda m: f"{m.turn} · cut" if m.heard is not None else str(m.turn)),
    ("End → audio", "From the last sound of your voice to the first sound of the reply",
     lambda m: _ms(m.eos_to_audio_ms)),
    ("ASR", "Speech recognition: from the end of your speech to its final text", lambda m: _ms(m.asr_ms)),
    ("TTFT", "Time to the reply's first token", lambda m: _ms(m.ttft_ms)),
    ("Voice", "First sound: from the reply's first words to their first sound (the voice's share)",
     lambda m: _ms(m.first_sound_ms)),
    ("Gaps", "Times the speaker ran dry while the reply played; drift: playing time beyond the audio's length",
     lambda m: "—" if m.underruns is None else f"{m.underruns} · {m.drift_ms:+,.0f} ms"),
    ("Cached", "Tokens of the call reused from the KV cache", lambda m: _tokens(m.cached_tokens)),
    ("New", "Tokens the model read for this turn", lambda m: _tokens(m.new_tokens)),
    ("KV", "Tokens in the call's KV cache after the reply", lambda m: _tokens(m.kv_tokens)),
)


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
    """A read-only view of a MetricsModel that keeps the newest turn in sight."""

    def __init__(self, model: MetricsModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setModel(model)
        self.setObjectName("callMetrics")
        self.setStyleSheet(TABLE_CSS)
        read_only_style(self, self.fontMetrics().height() + 8)
        self.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        header = self.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        # Fixed widths for the two widest texts (contents-sized, they were elided): the padding and
        # bold header of TABLE_CSS are not in Qt's size hints.
        bold = QFont(self.font())
        bold.setBold(True)
        widths = (self.fontMetrics().horizontalAdvance("888 · cut"), QFontMetrics(bold).horizontalAdvance(COLUMNS[1][0]))
        for column, width in enumerate(widths):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.Fixed)
            self.setColumnWidth(column, width + 32)
        # narrow: the numbers scroll sideways rather than being elided ("7…")
        header.setMinimumSectionSize(max(QFontMetrics(bold).horizontalAdvance(c[0]) for c in COLUMNS[2:]) + 32)
        self.setAccessibleName("Turn metrics")
        model.rowsInserted.connect(lambda *_: self.scrollToBottom())
