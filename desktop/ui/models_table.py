"""The Models page's table: one row per model on disk (name, family, parameters, quantisation,
size, images, whether it fits, where it was found), the loaded one in bold and marked, models that
cannot be loaded greyed with their problem as the tooltip."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QFont, QPalette
from PySide6.QtWidgets import QApplication

from desktop.models.facts import ModelFacts, human_bytes, human_params
from desktop.models.fit import Fit

COLUMNS = ("Model", "Family", "Parameters", "Quantisation", "Size", "Images", "Fits", "Found in", "")
Index = QModelIndex | QPersistentModelIndex


class ModelsTable(QAbstractTableModel):
    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self.rows: list[ModelFacts] = []
        self.fits: dict[str, Fit] = {}
        self.loaded: str | None = None  # the source of the loaded model
        self.loaded_note = "Loaded"

    def show(self, rows: list[ModelFacts], fits: dict[str, Fit]) -> None:
        self.beginResetModel()
        self.rows, self.fits = list(rows), dict(fits)
        self.endResetModel()

    def set_loaded(self, source: str | None, note: str = "Loaded") -> None:
        self.loaded, self.loaded_note = source, note
        if self.rows:
            self.dataChanged.emit(self.index(0, 0), self.index(len(self.rows) - 1, len(COLUMNS) - 1))

    def row_of(self, source: str) -> int:
        return next((i for i, r in enumerate(self.rows) if r.source == source), -1)

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
        row, col = self.rows[index.row()], index.column()
        fit = self.fits.get(row.source)
        if role == Qt.ItemDataRole.DisplayRole:
            return self._text(row, col, fit)
        if role == Qt.ItemDataRole.ToolTipRole:  # the name: where it is; the rest: why it can(not) load
            return row.source if col == 0 else row.problem or (fit.reason if fit is not None else None) or row.source
        if role == Qt.ItemDataRole.FontRole and row.source == self.loaded:
            font = QFont()
            font.setBold(True)
            return font
        if role == Qt.ItemDataRole.ForegroundRole and row.problem:
            return QApplication.palette().color(QPalette.ColorRole.PlaceholderText)
        if role == Qt.ItemDataRole.TextAlignmentRole and col in (2, 4):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.AccessibleTextRole and col == 0:
            return f"{row.name}, {self._text(row, 6, fit)}"
        return None

    def _text(self, row: ModelFacts, col: int, fit: Fit | None) -> str:
        if col == 0:
            return row.name
        if col == 1:
            return row.family or "?"
        if col == 2:
            return human_params(row.params)
        if col == 3:
            return row.quant or "?"
        if col == 4:
            return human_bytes(row.size_bytes) if row.size_bytes else "?"
        if col == 5:
            return "Yes" if row.vision else "No"
        if col == 6:
            if row.problem:
                return "Cannot load"
            return "?" if fit is None else ("Yes" if fit.fits else "Too large")
        if col == 7:
            return row.where
        return f"● {self.loaded_note}" if row.source == self.loaded else ""
