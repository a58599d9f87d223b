"""The admin page: counters, the workers table, the KV slots table (the slots that hold something,
and how many there are) and the request queue with a Cancel action. It shows whatever Snapshot it is given; the main window feeds it every ~500 ms."""

from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QFrame, QHBoxLayout, QLabel, QMenu, QPushButton, QScrollArea, QTableView, QVBoxLayout, QWidget,
)

from desktop.errors import OmnideskError
from desktop.tasks import TaskSet
from desktop.protocol import SlotState
from desktop.ui.admin.counters import CountersRow
from desktop.ui.admin.format import held_slots
from desktop.gateway.monitor import Snapshot
from desktop.ui.admin.queue_model import QueueModel
from desktop.ui.admin.rows_model import RowsModel
from desktop.ui.admin.slots_model import SlotsModel
from desktop.ui.admin.workers_model import WorkersModel
from desktop.ui.page_title import page_title
from desktop.ui.tables import read_only_table

log = logging.getLogger(__name__)
Cancel = Callable[[str], Awaitable[None]]


class AdminPanel(QWidget):
    """`cancel(request_id)` is awaited when the user cancels a queued request; `status(text)`
    reports what happened (for the status bar)."""

    status = Signal(str)

    def __init__(self, cancel: Cancel | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("adminPanel")
        self._cancel = cancel
        self._tasks = TaskSet()
        self.workers, self.slots, self.queue = WorkersModel(self), SlotsModel(self), QueueModel(self)
        self.counters = CountersRow()
        self.workers_view = _table(self.workers)
        self.slots_view = _table(self.slots)
        self.queue_view = _table(self.queue)
        self.queue_view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.queue_view.customContextMenuRequested.connect(self._queue_menu)
        self.queue_view.selectionModel().selectionChanged.connect(self._selection_changed)
        self.cancel_button = QPushButton("Cancel request")
        self.cancel_button.setEnabled(False)
        self.cancel_button.setToolTip("Remove the selected request from the queue")
        self.cancel_button.clicked.connect(self.cancel_selected)
        self.note = QLabel("Waiting for the engine…")
        self.note.setObjectName("adminNote")

        title = page_title("Admin")
        queue_head = QHBoxLayout()
        queue_head.addWidget(_section("Queue"))
        queue_head.addStretch(1)
        queue_head.addWidget(self.cancel_button)
        body = QWidget()  # in a scroll area: a short window scrolls the page instead of squashing a table
        layout = QVBoxLayout(body)
        layout.setContentsMargins(18, 14, 18, 10)
        head = QHBoxLayout()
        head.addWidget(title)
        head.addStretch(1)
        head.addWidget(self.note)
        layout.addLayout(head)
        layout.addWidget(self.counters)
        layout.addSpacing(4)
        layout.addWidget(_section("Workers"))
        layout.addWidget(self.workers_view)
        self.slots_title = _section(held_slots(0, 0))
        layout.addWidget(self.slots_title)
        layout.addWidget(self.slots_view, 1)  # the slots get the room; the other tables are as tall as their rows
        layout.addLayout(queue_head)
        layout.addWidget(self.queue_view)
        self.scroll = QScrollArea(self)
        self.scroll.setWidget(body)
        self.scroll.setWidgetResizable(True)
        self.scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)  # the page fits any window's width
        self.scroll.viewport().setBackgroundRole(QPalette.ColorRole.Window)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(self.scroll)
        self._fit_tables(1, 0, 0)

    # ------------------------------------------------------------------ data

    def show_snapshot(self, snap: Snapshot | None) -> None:
        if snap is None:
            self.note.setText("No model is running")
            for model in (self.workers, self.slots, self.queue):
                model.set_rows([])
            self.slots_title.setText(held_slots(0, 0))
            return
        selected = self.selected_request()
        held = [row for row in snap.slots if row.state is not SlotState.EMPTY]  # a worker may keep 100+
        self.slots_title.setText(held_slots(len(held), len(snap.slots)))
        self._fit_tables(len(snap.workers), len(held), len(snap.queue))
        self.workers.set_rows(snap.workers)
        self.slots.set_rows(held)
        self.queue.set_rows(snap.queue)
        if selected is not None and (row := self.queue.find(selected)) >= 0:
            self.queue_view.selectRow(row)
        self.counters.show_snapshot(snap)
        q = snap.queue_stats
        self.note.setText(f"Queue wait p50 {q.wait_ms_p50:.0f} ms · p95 {q.wait_ms_p95:.0f} ms")
        self._selection_changed()

    def _fit_tables(self, workers: int, slots: int, queue: int) -> None:
        """The workers and queue tables are as tall as their rows (the empty queue: two rows'
        height); the slots table shows at least four rows (or all it has) and takes the rest."""
        _fit(self.workers_view, workers, 1, 6)
        _fit(self.slots_view, slots, 2, 4, grow=True)
        _fit(self.queue_view, queue, 2, 6)

    def selected_request(self) -> str | None:
        rows = self.queue_view.selectionModel().selectedRows()
        return self.queue.row_key(rows[0].row()) if rows else None

    # ------------------------------------------------------------------ cancel

    def cancel_selected(self) -> None:
        request_id = self.selected_request()
        if request_id is not None:
            self.cancel_request(request_id)

    def cancel_request(self, request_id: str) -> asyncio.Task | None:
        if self._cancel is None:
            return None
        return self._tasks.spawn(self._do_cancel(request_id))

    async def _do_cancel(self, request_id: str) -> None:
        try:
            await self._cancel(request_id)  # type: ignore[misc]
        except OmnideskError as err:  # it started or ended meanwhile
            self.status.emit(f"Could not cancel: {err.message}")
            return
        self.status.emit(f"Cancelled request {request_id[:12]}")

    def _queue_menu(self, pos: QPoint) -> None:
        index = self.queue_view.indexAt(pos)
        request_id = self.queue.row_key(index.row()) if index.isValid() else None
        if request_id is None:
            return
        menu = QMenu(self)
        menu.addAction("Cancel request", lambda: self.cancel_request(request_id))
        menu.popup(self.queue_view.viewport().mapToGlobal(pos))

    def _selection_changed(self, *_: object) -> None:
        self.cancel_button.setEnabled(self._cancel is not None and self.selected_request() is not None)


def _fit(view: QTableView, rows: int, least: int, most: int, *, grow: bool = False) -> None:
    """Make a table as tall as its rows (`least` to `most` of them; more scroll inside it), or
    with `grow` at least that tall and free to take the room the page has."""
    shown = min(max(rows, least), most)
    height = view.horizontalHeader().sizeHint().height() + view.verticalHeader().defaultSectionSize() * shown
    height += 2 * view.frameWidth() + 2
    if grow:
        view.setMinimumHeight(height)
    else:
        view.setFixedHeight(height)


def _table(model: RowsModel) -> QTableView:
    view = read_only_table(model, row_height=26)
    view.horizontalHeader().setStretchLastSection(True)
    return view


def _section(text: str) -> QLabel:
    label = QLabel(text)
    label.setObjectName("sectionTitle")
    return label
