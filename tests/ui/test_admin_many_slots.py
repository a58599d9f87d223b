"""The admin page with a worker that keeps 128 conversations (slots follow the KV budget): the
KV slots table lists only the slots that hold something, its title counts them all."""

from __future__ import annotations

from pathlib import Path

from desktop.gateway.monitor import SlotRow, Snapshot, WorkerRow
from desktop.protocol import SlotState
from desktop.protocol.engine_stats import RequestCounts
from desktop.ui.admin.format import held_slots
from desktop.ui.admin.panel import AdminPanel

SHOTS = Path("/work/notes/shots")


def snapshot(total: int, held: dict[int, SlotState]) -> Snapshot:
    slots = [SlotRow("cpu0", i, held.get(i, SlotState.EMPTY), "ab12cd34" if i in held else "", 3 if i in held else 0,
                     1200 * (i + 1) if i in held else 0, 4.0 if i in held else None, 1 << 20 if i in held else None)
             for i in range(total)]
    worker = WorkerRow("cpu0", "busy", "cpu", 1, 4, 1, total, 0, "")
    return Snapshot([worker], slots, [], {}, RequestCounts(), {}, {})


def test_only_slots_holding_something_are_listed(qtbot):
    panel = AdminPanel()
    qtbot.addWidget(panel)
    panel.resize(1000, 700)
    panel.show()
    qtbot.waitExposed(panel)
    panel.show_snapshot(snapshot(128, {3: SlotState.IDLE, 40: SlotState.BUSY, 127: SlotState.SESSION}))
    assert panel.slots.rowCount() == 3
    assert [panel.slots.data(panel.slots.index(r, 1)) for r in range(3)] == ["3", "40", "127"]
    assert panel.slots_title.text() == held_slots(3, 128) and "3 of 128" in panel.slots_title.text()
    if SHOTS.is_dir():
        panel.grab().save(str(SHOTS / "slots-admin-128.png"))
    panel.show_snapshot(snapshot(128, {}))
    assert panel.slots.rowCount() == 0 and "0 of 128" in panel.slots_title.text()
    panel.show_snapshot(None)
    assert panel.slots_title.text() == "KV slots"


def test_the_title_in_words():
    assert held_slots(2, 2) == "KV slots · 2 of 2 hold a conversation"
    assert held_slots(1, 1_000) == "KV slots · 1 of 1,000 hold a conversation (empty ones not listed)"
    assert held_slots(0, 0) == "KV slots"
