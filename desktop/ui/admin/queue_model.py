"""Item model of the request queue: position, what kind of request and who sent it (this app or
the local API), how long it has waited, its estimated start and the worker it waits for."""

from __future__ import annotations

from desktop.gateway.monitor import QueueRow
from desktop.ui.admin.rows_model import RowsModel


class QueueModel(RowsModel[QueueRow]):
    COLUMNS = ("#", "Request", "Kind", "From", "Waiting", "Starts in", "Worker")
    NUMERIC = frozenset({0, 4, 5})
    ORIGINS = {"app": "this app", "api": "API"}

    def key(self, row: QueueRow) -> str:
        return row.request_id

    def cell(self, row: QueueRow, column: int) -> str:
        return (
            str(row.position),
            row.request_id[:12],
            row.kind,
            self.ORIGINS.get(row.origin, row.origin),
            f"{row.waited_s:.1f} s",
            f"~{row.eta_s:.0f} s" if row.eta_s >= 1 else "< 1 s",
            row.worker or "any",
        )[column]

    def tooltip(self, row: QueueRow, column: int) -> str | None:
        return row.request_id if column == 1 else None
