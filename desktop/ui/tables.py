"""The app's read-only list tables (Admin, Recordings, the call's turn metrics): whole rows
selected one at a time, no editing, alternating rows, no grid, no row numbers, columns sized to
their contents."""

from __future__ import annotations

from PySide6.QtCore import QAbstractItemModel
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView


def read_only_table(model: QAbstractItemModel, row_height: int | None = None) -> QTableView:
    """A QTableView over `model` in the app's list style; rows `row_height` px (default: the
    font's height + 12)."""
    view = QTableView()
    view.setModel(model)
    read_only_style(view, row_height)
    return view


def read_only_style(view: QTableView, row_height: int | None = None) -> None:
    """Give a table view (or a subclass, which may change the header's sizing after) that style."""
    view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    view.setAlternatingRowColors(True)
    view.setShowGrid(False)
    view.setWordWrap(False)
    view.verticalHeader().hide()
    view.verticalHeader().setDefaultSectionSize(row_height or view.fontMetrics().height() + 12)
    header = view.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    header.setHighlightSections(False)
