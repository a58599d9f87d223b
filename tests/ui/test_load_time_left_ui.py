"""A large model's load in the window: the banner and the status bar show how far it got and the
time left, as the worker reports them ("Loading model… 40% · about 12 s left")."""

from __future__ import annotations

from pathlib import Path

from desktop.gateway.monitor import Snapshot, WorkerRow
from desktop.protocol.engine_stats import QueueStats, RequestCounts
from desktop.settings import Settings
from desktop.ui.main_window import MainWindow
from desktop.ui.status_bar import worker_summary

SHOTS = Path("/work/notes/shots")


def row(message: str, wid: str = "cpu0") -> WorkerRow:
    return WorkerRow(wid, "loading", "cpu", 0, 4, 0, 4, 0, message)


def test_status_bar_and_banner_say_the_time_left(qapp, qtbot, screenshot):
    rows = [row("Loading model… 40% · about 12 s left")]
    snap = Snapshot(rows, [], [], {}, RequestCounts(), {}, {}, QueueStats(length=0))
    window = MainWindow(Settings(), lambda: snap)
    qtbot.addWidget(window)
    window.show()
    window.refresh()
    assert window.status.workers_label.text() == "1 worker: loading 40% · about 12 s left"
    assert window.banner.bar.value() == 40 and "about 12 s left" in window.banner.label.text()
    window.resize(1000, 600)
    path = screenshot(window, "main_window_loading_time_left")
    if SHOTS.is_dir():
        window.grab().save(str(SHOTS / "ready-loading-time-left.png"))
    assert path.is_file()


def test_without_an_estimate_the_status_bar_says_only_the_fraction():
    assert worker_summary([row("Loading model… 3%")]) == "1 worker: loading 3%"
    assert worker_summary([row("Loading tokenizer…")]) == "1 worker: loading"
    assert worker_summary([row("Loading model… 40% · about 2 min left"), row("Loading model… 20%", "cpu1")]) == \
        "2 workers: loading 20%"
