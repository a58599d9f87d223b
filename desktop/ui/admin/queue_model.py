"""Item model of the request queue: position, what kind of request, how long it has waited,
its estimated start and the worker it waits for (session commands are pinned to one)."""

from __future__ import annotations

from desktop.ui.admin.monitor import QueueRow
from desktop.ui.admin.rows_model import RowsModel


class QueueModel(RowsModel[QueueRow]):
    COLUMNS = ("#", "Request", "Kind", "Waiting", "Starts in", "Worker")
    NUMERIC = frozenset({0, 3, 4})

    def key(self, row: QueueRow) -> str:
        return row.request_id

    def cell(self, row: QueueRow, column: int) -> str:
        return (
            str(row.position),
            row.request_id[:12],
            row.kind,
            f"{row.waited_s:.1f} s",
            f"~{row.eta_s:.0f} s" if row.eta_s >= 1 else "< 1 s",
            row.worker or "any",
        )[column]

    def tooltip(self, row: QueueRow, column: int) -> str | None:
        return row.request_id if column == 1 else None
