"""Item model of the KV slots table: per worker slot its state, the first 8 hex digits of the
last message-prefix hash it holds, messages and tokens, when it was last used and its KV memory."""

from __future__ import annotations

from PySide6.QtGui import QIcon

from desktop.protocol import SlotState
from desktop.ui.admin.format import ago, size
from desktop.gateway.monitor import SlotRow
from desktop.ui.admin.rows_model import RowsModel
from desktop.ui.icons import state_dot


class SlotsModel(RowsModel[SlotRow]):
    COLUMNS = ("Worker", "Slot", "State", "Hash", "Messages", "Tokens", "KV memory", "Last used")
    NUMERIC = frozenset({1, 4, 5, 6})

    def key(self, row: SlotRow) -> str:
        return row.key

    def cell(self, row: SlotRow, column: int) -> str:
        empty = row.state is SlotState.EMPTY
        return (
            row.worker,
            str(row.index),
            row.state,
            row.hash_prefix or "—",
            "—" if empty else str(row.messages),
            "—" if empty else f"{row.tokens:,}",
            "—" if empty else size(row.kv_bytes),
            ago(row.idle_s),
        )[column]

    def icon(self, row: SlotRow, column: int) -> QIcon | None:
        return state_dot(row.state) if column == 2 else None

    def tooltip(self, row: SlotRow, column: int) -> str | None:
        if column == 3:
            return ("Chained SHA-256 of the conversation this slot holds (first 8 hex digits): "
                    "a new turn of that conversation is routed here")
        if column == 4:
            return "Messages whose prefix hash the slot holds"
        return None
