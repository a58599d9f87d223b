"""Base of the admin tables' item models: a list of frozen rows shown read-only, updated in
place (dataChanged) when the same rows come back so that selection and scrolling survive."""

from __future__ import annotations

from typing import Any, Generic, Sequence, TypeVar

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QIcon

from desktop.ui.plain import plain_tip

Row = TypeVar("Row")
Index = QModelIndex | QPersistentModelIndex
RIGHT = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
LEFT = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter


class RowsModel(QAbstractTableModel, Generic[Row]):
    """Subclasses set COLUMNS and NUMERIC (right-aligned column indexes) and implement `key`,
    `cell`, and optionally `icon` and `tooltip`."""

    COLUMNS: tuple[str, ...] = ()
    NUMERIC: frozenset[int] = frozenset()

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self.rows: list[Row] = []

    # ------------------------------------------------------------------ to implement

    def key(self, row: Row) -> str:
        raise NotImplementedError

    def cell(self, row: Row, column: int) -> str:
        raise NotImplementedError

    def icon(self, row: Row, column: int) -> QIcon | None:
        return None

    def tooltip(self, row: Row, column: int) -> str | None:
        return None

    # ------------------------------------------------------------------ updates

    def set_rows(self, rows: Sequence[Row]) -> None:
        rows = list(rows)
        if [self.key(r) for r in rows] == [self.key(r) for r in self.rows]:
            if rows != self.rows:
                self.rows = rows
                self.dataChanged.emit(self.index(0, 0), self.index(len(rows) - 1, len(self.COLUMNS) - 1))
            return
        self.beginResetModel()
        self.rows = rows
        self.endResetModel()

    def row_key(self, row: int) -> str | None:
        return self.key(self.rows[row]) if 0 <= row < len(self.rows) else None

    def find(self, key: str) -> int:
        return next((i for i, r in enumerate(self.rows) if self.key(r) == key), -1)

    # ------------------------------------------------------------------ QAbstractTableModel

    def rowCount(self, parent: Index = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: Index = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.COLUMNS)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or index.row() >= len(self.rows):
            return None
        row, column = self.rows[index.row()], index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return self.cell(row, column)
        if role == Qt.ItemDataRole.DecorationRole:
            return self.icon(row, column)
        if role == Qt.ItemDataRole.ToolTipRole:
            tip = self.tooltip(row, column)
            return plain_tip(tip) if isinstance(tip, str) else tip
        if role == Qt.ItemDataRole.TextAlignmentRole:
            return RIGHT if column in self.NUMERIC else LEFT
        return None

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return self.COLUMNS[section] if 0 <= section < len(self.COLUMNS) else None
        if role == Qt.ItemDataRole.TextAlignmentRole and orientation == Qt.Orientation.Horizontal:
            return RIGHT if section in self.NUMERIC else LEFT
        return None

    def flags(self, index: Index) -> Qt.ItemFlag:
        return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable if index.isValid() else Qt.ItemFlag.NoItemFlags
