"""The Models page on its own (offscreen, a fake catalog): the table shows each model's facts, the
loaded one and the ones that cannot load; Load and Unload ask; a download shows its progress, speed
and time left, with Resume and Cancel. Screenshots go to /work/notes/shots when that folder exists."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from desktop.model.hardware import GIB, Machine
from desktop.models.download import Job, State
from desktop.models.facts import Kind, ModelFacts
from desktop.models.fit import fit
from desktop.models.hub import Choice, HubFile
from desktop.settings import Settings
from desktop.ui.models_downloads import job_detail
from desktop.ui.models_page import ModelsPage
from desktop.workers.readiness import decide

SHOTS = Path("/work/notes/shots")
ROWS = [
    ModelFacts("default", Kind.EMBEDDED, "SmolLM2 135M (embedded)", "Embedded", "llama", 134_515_008, "Q4_1", 98 << 20),
    ModelFacts("/hf/models--Qwen--Qwen2.5-1.5B-Instruct/snapshots/a1", Kind.FOLDER, "Qwen/Qwen2.5-1.5B-Instruct",
               "Hugging Face cache", "qwen2", 1_543_714_304, "BF16", int(3.1 * GIB)),
    ModelFacts("/models/gemma-3-4b-it-Q4_K_M.gguf", Kind.GGUF, "Gemma 3 4B It", "LM Studio", "gemma3",
               3_880_000_000, "Q4_K_M", int(2.5 * GIB), vision=True),
    ModelFacts("/models/llama-70b-Q4_K_M.gguf", Kind.GGUF, "Llama 3.3 70B Instruct", "Models folder", "llama",
               70_550_000_000, "Q4_K_M", int(42.5 * GIB)),
    ModelFacts("/models/whisper-small.gguf", Kind.GGUF, "whisper-small", "Models folder", "whisper", 240_000_000,
               "F16", 480 << 20, problem="whisper-small.gguf is a whisper model, an architecture Omnidesk cannot run."),
]


def _fits():
    choices = decide(Machine(physical_cores=8, logical_cores=16, ram_total=32 * GIB, ram_available=24 * GIB,
                             disk_free=200 * GIB))
    return {r.source: fit(r, choices) for r in ROWS if not r.problem}


def _job(state=State.RUNNING) -> Job:
    files = [HubFile("Qwen2.5-7B-Instruct-Q4_K_M.gguf", int(4.68 * GIB), "ab" * 32)]
    return Job("j1", "bartowski/Qwen2.5-7B-Instruct-GGUF", "main", files, "/models/x", state=state,
               done=int(1.9 * GIB), speed=23.4 * (1 << 20), eta_s=121.0)


@pytest.fixture
def page(qtbot):
    page = ModelsPage(Settings(model_source="tiny", hub_downloads=True, idle_unload_minutes=30), "/home/me/models")
    qtbot.addWidget(page)
    page.resize(1100, 760)
    return page


def _shot(widget, name: str) -> None:
    if SHOTS.is_dir():
        widget.grab().save(str(SHOTS / f"manager-{name}.png"))


def test_the_table_shows_each_models_facts_and_the_loaded_one(page, qtbot):
    page.show_models(ROWS, _fits())
    page.set_loaded("default", "SmolLM2-135M-Instruct")
    page.show()
    qtbot.waitExposed(page)
    t = page.table
    cells = [[t.data(t.index(r, c)) for c in range(t.columnCount())] for r in range(t.rowCount())]
    assert cells[0][:8] == ["SmolLM2 135M (embedded)", "llama", "135M", "Q4_1", "98.0 MB", "No", "Yes", "Embedded"]
    assert cells[0][8] == "● Loaded" and cells[1][8] == ""
    assert cells[2][5] == "Yes"  # Gemma sees images
    assert cells[3][6] == "Too large" and cells[4][6] == "Cannot load"
    assert "would not fit" in t.data(t.index(3, 6), Qt.ItemDataRole.ToolTipRole)
    assert "SmolLM2-135M-Instruct" in page.loaded_label.text() and page.unload_button.isEnabled()
    assert page.selected_source() == "default" and not page.load_button.isEnabled()  # it is loaded already
    page.show_job(_job())
    page.downloads.show_choices([Choice("Q4_K_M · 4.7 GB", ()), Choice("Q8_0 · 8.1 GB", ())])
    page.downloads.repo.setText("bartowski/Qwen2.5-7B-Instruct-GGUF")
    assert page.downloads.files.currentText() == "Q4_K_M · 4.7 GB"
    qtbot.wait(50)  # the new download row is laid out
    _shot(page, "page")


def test_load_asks_for_the_selected_model_and_refuses_one_that_cannot_load(page, qtbot):
    page.show_models(ROWS, _fits())
    page.set_loaded("default", "SmolLM2")
    asked, said = [], []
    page.load_requested.connect(asked.append)
    page.status.connect(said.append)
    page.view.selectRow(2)
    assert page.load_button.isEnabled() and "Needs about" in page.detail.text()
    QTest.mouseClick(page.load_button, Qt.MouseButton.LeftButton)
    assert asked == ["/models/gemma-3-4b-it-Q4_K_M.gguf"]
    page.view.selectRow(4)
    assert not page.load_button.isEnabled() and "cannot run" in page.detail.text()
    page.load_selected()  # Enter on a row that cannot load
    assert len(asked) == 1 and "cannot run" in said[-1]
    unloads = []
    page.unload_requested.connect(lambda: unloads.append(1))
    QTest.mouseClick(page.unload_button, Qt.MouseButton.LeftButton)
    assert unloads == [1]
    page.set_loaded(None, None)
    assert not page.unload_button.isEnabled() and "No model is loaded" in page.loaded_label.text()


def test_the_first_showing_asks_for_a_scan_and_f5_asks_again(page, qtbot):
    asked = []
    page.refresh_requested.connect(lambda: asked.append(1))
    page.show()
    qtbot.waitExposed(page)
    assert asked == [1]
    page.hide()
    page.show()
    assert asked == [1]
    page.activateWindow()
    assert QTest.qWaitForWindowActive(page)
    page.view.setFocus()
    QTest.keyClick(page.view, Qt.Key.Key_F5)
    assert asked == [1, 1]


def test_a_download_row_shows_progress_speed_and_time_left(page, qtbot):
    job = _job()
    page.show_job(job)
    row = page.downloads.rows["j1"]
    assert row.bar.value() == int(1000 * job.done / job.total)
    assert job_detail(job) == "1.9 GB of 4.7 GB · 23.4 MB/s · 2 min 01 s left"
    assert not row.resume_button.isVisibleTo(page) and row.cancel_button.isVisibleTo(page)
    job.state, job.message = State.PAUSED, "The Hub could not be reached (ConnectError). Resume when you are online."
    page.show_job(job)
    assert row.resume_button.isVisibleTo(page) and "Resume when you are online" in row.detail.text()
    resumed, cancelled = [], []
    page.downloads.resume_requested.connect(resumed.append)
    page.downloads.cancel_requested.connect(cancelled.append)
    row.resume_button.click()
    row.cancel_button.click()
    assert resumed == ["j1"] and cancelled == ["j1"]
    job.state = State.CANCELLED
    page.show_job(job)
    assert "j1" not in page.downloads.rows


def test_downloads_are_off_until_allowed(qtbot):
    page = ModelsPage(Settings(model_source="tiny"), "/m")
    qtbot.addWidget(page)
    assert not page.downloads.allow.isChecked()
    assert not page.downloads.repo.isEnabled() and not page.downloads.download_button.isEnabled()
    seen = []
    page.downloads.allow_changed.connect(seen.append)
    page.downloads.allow.setChecked(True)
    assert seen == [True] and page.downloads.repo.isEnabled()
    page.resize(1000, 700)
    _shot(page, "offline")
