"""Issue 19, item 1: recordings with impossible numbers (`"ended_at": Infinity`, `"started_at": 1e20`,
a timeline `t: 1e999`, `ended_at: 1e300`) list as damaged and open, and no exception inside the list
model's data()/headerData() ever reaches Qt (PySide turned the OverflowError into a segfault)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PySide6.QtCore import Qt

from desktop.recording.library import Summary
from desktop.ui.recordings import RecordingsPage
from desktop.ui.recordings.list_model import COLUMNS, DURATION, RecordingsModel

pytestmark = pytest.mark.hardening
START = 1_764_000_000.0
DAMAGED = "⚠ damaged"  # what a cell that cannot be shown reads
LINES = ('{"t": 1.0, "kind": "user_text", "text": "hi", "turn": 1}\n'
         '{"t": 2.0, "kind": "assistant_text", "text": "yo", "turn": 1}\n')
ROLES = [Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole, Qt.ItemDataRole.ForegroundRole,
         Qt.ItemDataRole.FontRole, Qt.ItemDataRole.TextAlignmentRole, Qt.ItemDataRole.UserRole + 1]


def folder(root: Path, name: str, **meta) -> Path:
    f = root / name
    f.mkdir(parents=True)
    fields = {"version": 1, "type": "chat", "title": "", "started_at": START, "ended_at": START + 10.0, **meta}
    (f / "meta.json").write_text(json.dumps(fields), encoding="utf-8")
    timeline = LINES + ('{"t": 1e999, "kind": "note", "text": "x"}\n' if meta.get("ended_at", 0) is None else "")
    (f / "timeline.jsonl").write_text(timeline, encoding="utf-8")
    return f


@pytest.fixture
def root(tmp_path):
    root = tmp_path / "recordings"
    folder(root, "20261125-100000-chat-00000001", ended_at=math.inf)
    folder(root, "20261125-110000-chat-00000002", started_at=1e20)
    folder(root, "20261125-120000-call-00000003", ended_at=None)
    folder(root, "20261125-130000-chat-00000004", ended_at=1e300, title="Huge end")
    return root


def every_cell(model) -> list:
    out = []
    for r in range(model.rowCount()):
        for c in range(model.columnCount()):
            out += [model.data(model.index(r, c), role) for role in ROLES]
    out += [model.headerData(s, o, role) for s in range(-1, len(COLUMNS) + 2)
            for o in (Qt.Orientation.Horizontal, Qt.Orientation.Vertical) for role in ROLES]
    return out


def test_model_cells_never_raise_on_impossible_numbers(qapp):
    """Summaries as an older scan made them (no checks): every cell is text or empty, none raises."""
    model = RecordingsModel(clock=lambda: START + 60)
    rows = [Summary(Path(f"/r/{i}"), "call", "", "", started, duration, 10, complete, False, live)
            for i, (started, duration, complete, live) in enumerate([
                (1e20, 1.0, True, False), (START, math.inf, True, False), (START, math.nan, False, False),
                (math.inf, 5.0, False, True), (-1e300, 1e300, True, False)])]
    model.set_rows(rows)
    cells = every_cell(model)  # raised OverflowError / ValueError before
    texts = [model.data(model.index(r, c)) for r in range(len(rows)) for c in range(len(COLUMNS))]
    assert all(isinstance(t, str) for t in texts)
    assert model.data(model.index(0, 0)) == "—"  # no date rather than a crash
    assert cells


def test_an_exception_in_a_cell_is_caught_and_logged_once(qapp, caplog):
    class Broken(RecordingsModel):
        def _data(self, index, role):
            raise RuntimeError("boom")

    model = Broken()
    model.set_rows([Summary(Path("/r/x"), "call", "t", "", START, 1.0, 1, True, False)])
    with caplog.at_level("ERROR"):
        assert model.data(model.index(0, 0)) == DAMAGED
        assert model.data(model.index(0, 1), Qt.ItemDataRole.ToolTipRole) is None
        model.data(model.index(0, 2))
    assert model.failures == 3 and len([r for r in caplog.records if "could not be shown" in r.message]) == 1


def test_page_lists_damaged_recordings_and_opens_them(qtbot, root, screenshot):
    page = RecordingsPage(lambda: root)
    qtbot.addWidget(page)
    page.resize(1000, 420)
    page.show()  # the app reopens on this page: it crashed here, at every start
    qtbot.waitUntil(lambda: page.list.model.rowCount() == 4 and page.list.background.busy == 0)
    proxy = page.list.proxy
    durations = [proxy.data(proxy.index(r, DURATION)) for r in range(4)]
    assert all(DAMAGED in d for d in durations), durations
    tips = [proxy.data(proxy.index(r, DURATION), Qt.ItemDataRole.ToolTipRole) for r in range(4)]
    assert all("damaged" in t for t in tips)
    assert page.list.model.failures == 0  # the values were checked, nothing had to be caught
    qtbot.wait(50)
    screenshot(page, "recordings_damaged_list")
    for r in range(4):
        page.list.table.selectRow(r)
        page.list.open_selected()
        qtbot.waitUntil(lambda: page.currentWidget() is page.viewer and page.opening is None)
        viewer = page.viewer
        assert viewer.notice.isVisible() and "could not be read" in viewer.notice.text()
        assert viewer.player.duration <= 10.0 and "hi" in viewer.transcript.toPlainText()
        if r == 0:
            screenshot(page, "recordings_damaged_viewer")
        viewer.close_recording()
        assert page.currentWidget() is page.list


anything = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(10**30), max_value=10**30),
                     st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=5))


@settings(max_examples=80, deadline=None)
@given(started=anything, duration=anything, size=anything, title=anything, words=anything,
       complete=anything, live=anything, kind=st.sampled_from(["call", "chat", "x"]))
def test_fuzzed_rows_never_raise_into_qt(qapp, started, duration, size, title, words, complete, live, kind):
    """Rows with any values at all (as a future bug could make them): every cell is text or empty."""
    model = RecordingsModel(clock=lambda: START)
    model.set_rows([Summary(Path("/r/x"), kind, title, words, started, duration, size, complete, False, live)])
    every_cell(model)  # nothing raises (it would have reached Qt)
    texts = [model.data(model.index(0, c)) for c in range(len(COLUMNS))]
    assert all(t is None or isinstance(t, (str, int, float)) for t in texts)
