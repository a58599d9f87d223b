"""Item model of the workers table: id, state (with a coloured dot), device, requests in flight,
busy slots and what the worker last reported (load progress or its error)."""

from __future__ import annotations

from PySide6.QtGui import QIcon

from desktop.gateway.monitor import WorkerRow
from desktop.ui.admin.rows_model import RowsModel
from desktop.ui.icons import state_dot


class WorkersModel(RowsModel[WorkerRow]):
    COLUMNS = ("Worker", "State", "Device", "In flight", "Busy slots", "Sessions", "Detail")
    NUMERIC = frozenset({3, 4, 5})

    def key(self, row: WorkerRow) -> str:
        return row.id

    def cell(self, row: WorkerRow, column: int) -> str:
        return (
            row.id,
            row.state,
            row.device,
            f"{row.in_flight} / {row.capacity}",
            f"{row.slots_used} / {row.slots_total}",
            str(row.sessions),
            row.message,
        )[column]

    def icon(self, row: WorkerRow, column: int) -> QIcon | None:
        return state_dot(row.state) if column == 1 else None

    def tooltip(self, row: WorkerRow, column: int) -> str | None:
        if column == 3:
            return "Requests running on this worker / how many it batches at once"
        if column == 4:
            return ("Slots computing a reply now / all slots; an idle slot still keeps its conversation's "
                    "KV (the KV slots table lists what each holds)")
        if column == 6 and row.message:
            return row.message
        return None
