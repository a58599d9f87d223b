"""Admin panel tests (offscreen, tiny model): after chats it lists the worker and its slots with
hash, tokens, age and KV memory; the counters add up; a queued request can be cancelled."""

from __future__ import annotations

import asyncio
import re

import pytest
from PySide6.QtCore import Qt

from desktop.composition import Composition
from desktop.protocol import ChunkEvent, Done
from desktop.model.messages import Message
from desktop.model.params import SamplingParams
from desktop.settings import Settings
from desktop.ui.admin.format import ago, loading_fraction, size
from desktop.gateway.monitor import WorkerRow
from desktop.ui.status_bar import queue_summary, worker_summary


@pytest.fixture
def comp(tmp_path, monkeypatch, qapp, aloop, qtbot):
    for name in ("CONFIG", "DATA", "LOG"):
        monkeypatch.setenv(f"OMNIDESK_{name}_DIR", str(tmp_path / name.lower()))
    made: list[Composition] = []

    def make(**fields) -> Composition:
        c = Composition(qapp, Settings(model_source="tiny", **fields), settings_path=tmp_path / "settings.json")
        c.start()
        made.append(c)
        assert aloop.run(c.wait_ready(60))  # before any qtbot wait: those step tasks outside the loop
        qtbot.waitExposed(c.window)
        return c

    yield make
    for c in made:
        aloop.run(c.shutdown(), 30)


async def chat(gateway, messages: list[Message], max_tokens: int = 8) -> Done:
    end = None
    async for event in gateway.chat(messages, SamplingParams(max_tokens=max_tokens, temperature=0.0)):
        end = event
    assert isinstance(end, Done), end
    return end


def cells(view, row: int) -> list[str]:
    model = view.model()
    return [model.data(model.index(row, c)) for c in range(model.columnCount())]


def test_admin_lists_worker_and_slots_after_chats(comp, aloop, screenshot):
    c = comp()
    c.window.show_page("admin")

    async def conversations() -> None:
        for opener in ("Hello there", "What is the weather like?"):
            msgs = [Message("system", "You are a helpful assistant."), Message("user", opener)]
            done = await chat(c.proxy, msgs)
            await chat(c.proxy, msgs + [Message("assistant", done.text), Message("user", "And then?")])

    aloop.run(conversations(), 60)
    c.window.refresh()
    panel = c.window.admin
    assert panel.workers.rowCount() == 1
    worker = cells(panel.workers_view, 0)
    assert worker[:3] == ["cpu0", "idle", "cpu"] and worker[3] == "0 / 4"
    total = int(re.fullmatch(r"0 / (\d+)", worker[4]).group(1))  # slots: as many as the KV budget holds
    assert total > 4
    rows = [cells(panel.slots_view, r) for r in range(panel.slots.rowCount())]
    used = [r for r in rows if r[2] == "idle"]
    assert len(used) == 2 == len(rows), rows  # one slot per conversation, the second turn hit the first's slot
    assert panel.slots_title.text() == f"KV slots · 2 of {total} hold a conversation (empty ones not listed)"
    for r in used:
        assert re.fullmatch(r"[0-9a-f]{8}", r[3]) and int(r[4]) >= 3 and int(r[5].replace(",", "")) > 0
        assert r[7] in ("just now", "1 s ago", "2 s ago") and r[6].endswith(("KB", "MB", "B"))
    assert all(r[3] == "—" and r[6] == "—" for r in rows if r[2] == "empty")
    counters = panel.counters
    shown = {card: card.value.text().replace("\u00a0", " ") for card in
             (counters.requests, counters.hit_rate, counters.saved, counters.routing, counters.ttft)}
    assert shown[counters.requests] == "4 / 4"
    assert shown[counters.hit_rate] != "—" and shown[counters.saved] != "0"
    hit, free = map(int, re.match(r"(\d+) hit · (\d+) free", shown[counters.routing]).groups())
    assert hit >= 2 and hit + free == 4  # a shared system prompt may already route the 2nd opener as a hit
    assert re.fullmatch(r"\d+ / \d+ ms", shown[counters.ttft])
    c.window.resize(1100, 720)
    screenshot(c.window, "main_window_admin")


def test_queued_request_is_listed_and_can_be_cancelled(comp, aloop, qtbot):
    c = comp(slots_per_worker=1)
    c.window.show_page("admin")
    panel = c.window.admin

    async def scenario() -> None:
        long = c.proxy.chat([Message("user", "Tell me a long story")],
                            SamplingParams(max_tokens=4000, ignore_eos=True))
        first = await long.__anext__()
        while not isinstance(first, ChunkEvent):  # running: the only slot is taken
            first = await long.__anext__()
        waiting = c.proxy.chat([Message("user", "Me too")], SamplingParams(max_tokens=4))
        await asyncio.sleep(0.05)
        c.window.refresh()
        assert panel.queue.rowCount() == 1
        row = cells(panel.queue_view, 0)
        assert row[0] == "1" and waiting.request_id.startswith(row[1]) and row[2] == "chat" and row[3] == "this app" and row[6] == "any"
        assert c.window.status.queue_label.text() == "Queue: 1 waiting"
        panel.queue_view.selectRow(0)
        assert panel.cancel_button.isEnabled()
        said: list[str] = []
        panel.status.connect(said.append)
        qtbot.mouseClick(panel.cancel_button, Qt.MouseButton.LeftButton)
        events = [e async for e in waiting]
        assert isinstance(events[-1], Done) and events[-1].stats.finish_reason == "cancelled"
        await asyncio.sleep(0.05)
        assert said and said[0].startswith("Cancelled request")
        c.window.refresh()
        assert panel.queue.rowCount() == 0 and not panel.cancel_button.isEnabled()
        panel.cancel_request(waiting.request_id)  # gone already: a message, not an exception
        await asyncio.sleep(0.05)
        assert said[-1].startswith("Could not cancel")
        await long.aclose()

    aloop.run(scenario(), 60)


def test_a_lone_running_reply_shows_its_slot_busy(comp, aloop, screenshot):
    """While a reply streams, its slot is active (with its prompt's tokens) and counted in Busy
    slots, though the gateway's mirror of the slots changes only when the reply ends."""
    c = comp()
    c.window.show_page("admin")
    panel = c.window.admin

    async def scenario() -> None:
        msgs = [Message("user", "Hello there")]
        await chat(c.proxy, msgs)  # slot holds a finished conversation: idle, with its hash
        long = c.proxy.chat([Message("user", "Tell me a long story")], SamplingParams(max_tokens=4000, ignore_eos=True))
        event = await long.__anext__()
        while not isinstance(event, ChunkEvent):
            event = await long.__anext__()
        c.window.refresh()
        worker = cells(panel.workers_view, 0)
        assert worker[1] == "busy" and worker[3] == "1 / 4" and re.fullmatch(r"1 / \d+", worker[4]), worker
        rows = [cells(panel.slots_view, r) for r in range(panel.slots.rowCount())]
        active = [r for r in rows if r[2] == "busy"]
        assert len(active) == 1 and [r[2] for r in rows].count("idle") == 1, rows
        assert active[0][4] == "1" and int(active[0][5]) > 0 and active[0][7] == "just now", active
        c.window.resize(1100, 720)
        screenshot(c.window, "admin_running_reply")
        await long.aclose()
        await asyncio.sleep(0.3)
        c.window.refresh()
        assert cells(panel.workers_view, 0)[4].startswith("0 / ")
        assert "busy" not in [cells(panel.slots_view, r)[2] for r in range(panel.slots.rowCount())]

    aloop.run(scenario(), 60)


def test_the_slots_table_gets_the_room_at_any_window_size(comp, aloop, qtbot, screenshot):
    """At the page size of the window's minimum (953x470 under X) the page scrolls rather than
    squash the slots table below four rows, and the empty queue stays small; in a big window the
    slots table takes the room. (Four conversations are kept: the table lists the slots that hold one.)"""
    from desktop.ui.admin.panel import AdminPanel
    from desktop.ui.theme import WINDOW_CSS

    c = comp()

    async def four() -> None:
        for i in range(4):
            await chat(c.proxy, [Message("user", f"Conversation {i}")], max_tokens=2)

    aloop.run(four(), 60)
    window = c.window
    window.show_page("admin")
    window.resize(1600, 1000)
    window.refresh()
    qtbot.wait(50)
    big = window.admin
    screenshot(window, "admin_large")
    small = AdminPanel()  # the page as a 953x470 window shows it: less the sidebar, menu and status bar
    qtbot.addWidget(small)
    small.setStyleSheet(WINDOW_CSS)
    small.show_snapshot(c.snapshot())
    small.resize(953 - 172, 470 - 45)
    small.show()
    qtbot.waitExposed(small)
    screenshot(small, "admin_min_size")
    for panel in (big, small):
        row_h = panel.slots_view.verticalHeader().defaultSectionSize()
        assert panel.slots.rowCount() == 4
        assert panel.slots_view.viewport().height() >= 4 * row_h  # every slot row in sight
        assert not panel.slots_view.verticalScrollBar().isVisible()
        assert panel.queue_view.viewport().height() <= 2 * row_h + 4  # empty: two rows' height
    assert big.slots_view.height() > 6 * big.queue_view.height() // 2  # the big window's room went to the slots
    assert not big.scroll.verticalScrollBar().isVisible()
    bar = small.scroll.verticalScrollBar()
    assert bar.isVisible() and bar.maximum() > 0  # the short page scrolls, up and down only
    assert not small.scroll.horizontalScrollBar().isVisible()


def test_formatting_helpers():
    assert [ago(None), ago(0.2), ago(3.4), ago(125), ago(7200)] == [
        "—", "just now", "3 s ago", "2 min ago", "2 h ago"]
    assert [size(None), size(512), size(23 * 1024), size(3_500_000), size(5 << 30)] == [
        "—", "512 B", "23 KB", "3.3 MB", "5.0 GB"]
    assert loading_fraction("Loading model… 40%") == 0.4 and loading_fraction("Loading tokenizer…") is None
    row = lambda state, msg="": WorkerRow("w", state, "cpu", 0, 4, 0, 4, 0, msg)  # noqa: E731
    assert worker_summary([row("idle")]) == "1 worker: idle"
    assert worker_summary([row("loading", "Converting… 40%")]) == "1 worker: loading 40%"
    assert worker_summary([row("busy"), row("idle"), row("idle")]) == "3 workers: 1 busy, 2 idle"
    assert worker_summary([row("loading", "a 10%"), row("loading", "b 30%")]) == "2 workers: loading 10%"
    assert worker_summary([]) == "No workers" and queue_summary(0) == "Queue: empty"


def test_a_narrow_counter_wraps_its_value_instead_of_cutting_it(qtbot, screenshot):
    """The Admin page at the window's minimum width: "12 hit · 34 free" was cut at the card's edge."""
    from desktop.ui.admin.counters import CountersRow
    from desktop.ui.theme import WINDOW_CSS

    from PySide6.QtWidgets import QScrollArea

    row = CountersRow()
    row.routing.set("12 hit · 34 free", "0 evict · 0 session")
    row.requests.set("120 / 120", "0 running")
    page = QScrollArea()  # as the Admin page holds it: scrolls up and down only
    page.setStyleSheet(WINDOW_CSS)  # the main window's: the values in 13 pt bold
    page.setWidgetResizable(True)
    page.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    page.setWidget(row)
    qtbot.addWidget(page)
    page.resize(440, 200)  # under the row's one-line width
    page.show()
    qtbot.waitExposed(page)
    assert row.width() <= page.viewport().width()  # no card runs past the page's edge
    for card in (row.routing, row.requests):
        label = card.value
        lines = [line for line in label.text().split("· ")]
        widest = max(label.fontMetrics().horizontalAdvance(line) for line in lines)
        assert widest <= label.contentsRect().width(), (label.text(), widest, label.contentsRect().width())
        whole = label.fontMetrics().horizontalAdvance(label.text())
        if whole > label.contentsRect().width():  # it does not fit on one line: it wrapped, each line whole
            assert label.height() >= 2 * label.fontMetrics().lineSpacing()
    screenshot(page, "admin_counters_narrow")
