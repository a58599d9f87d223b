"""Issue 22: Settings → Cache → "Conversation memory on disk": the budget in GB (0 = off), the
space the snapshots take now (counted off the UI thread), and "Clear", which asks first."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QMessageBox

from desktop.settings import Settings
from desktop.ui.settings_dialog import SettingsDialog
from desktop.workers.kv_disk.files import SnapshotDir

SHOTS = Path("/work/notes/shots")


def _snapshots(tmp_path: Path, sizes: list[int]) -> SnapshotDir:
    folder = SnapshotDir(tmp_path / "kv")
    folder.root.mkdir()
    for i, size in enumerate(sizes):
        folder.path_for(f"conv{i % 3}", f"{i:04x}").write_bytes(b"\0" * size)
    return folder


class CountingThreads(SnapshotDir):
    """A SnapshotDir that notes the threads its entries are read on."""

    threads: list[str]

    def entries(self):
        self.threads.append(threading.current_thread().name)
        return super().entries()


def _dialog(qtbot, settings: Settings, snapshots) -> SettingsDialog:
    dlg = SettingsDialog(settings, sound_devices=[], page="Cache", snapshots=snapshots)
    qtbot.addWidget(dlg)
    dlg.open()
    qtbot.waitExposed(dlg)
    return dlg


def test_the_cache_page_shows_the_disk_budget_and_the_space_in_use(qtbot, tmp_path):
    folder = CountingThreads(_snapshots(tmp_path, [300 << 10] * 4 + [1 << 20]).root)
    folder.threads = []
    dlg = _dialog(qtbot, Settings(), folder)
    page = dlg.tabs.currentWidget()
    assert page.disk_budget.value() == 2.0 and page.disk_budget.suffix() == " GB"  # the 2048 MB default
    qtbot.waitUntil(lambda: "snapshots" in page.disk_usage.label.text(), timeout=5000)
    assert page.disk_usage.label.text() == "2.2 MB in 5 snapshots"
    assert folder.threads and threading.main_thread().name not in folder.threads  # counted off the UI thread
    assert page.disk_budget.toolTip() and page.disk_usage.clear.toolTip()
    SHOTS.mkdir(parents=True, exist_ok=True)
    dlg.grab().save(str(SHOTS / "diskapp-cache-page.png"))


def test_the_budget_is_saved_in_mb_and_zero_turns_the_disk_off(qtbot, tmp_path):
    applied: list[Settings] = []
    dlg = _dialog(qtbot, Settings(kv_disk_budget_mb=512), SnapshotDir(tmp_path / "none"))
    dlg.applied.connect(applied.append)
    page = dlg.tabs.currentWidget()
    assert page.disk_budget.value() == 0.5
    qtbot.waitUntil(lambda: page.disk_usage.label.text() == "Nothing saved yet", timeout=5000)
    assert not page.disk_usage.clear.isEnabled()
    page.disk_budget.setValue(0)
    assert page.disk_budget.text() == "Off"
    assert dlg.needs_reload()  # the workers are rebuilt for a new budget
    qtbot.mouseClick(dlg.ok_button, Qt.MouseButton.LeftButton)
    assert applied and applied[-1].kv_disk_budget_mb == 0 and applied[-1].worker_config().kv_dir == ""
    dlg2 = _dialog(qtbot, Settings(), None)
    page2 = dlg2.tabs.currentWidget()
    page2.disk_budget.setValue(3.5)
    assert page2.values()["kv_disk_budget_mb"] == 3584


def test_the_budget_and_clear_are_reached_from_the_keyboard(qtbot, tmp_path):
    """Alt+D and Alt+L (mnemonics: unique per page, see test_settings_dialog), and Tab: both are in
    the page's focus chain (offscreen Qt has no active window to send real shortcuts to)."""
    dlg = _dialog(qtbot, Settings(), _snapshots(tmp_path, [4096]))
    page = dlg.tabs.currentWidget()
    usage = page.disk_usage
    qtbot.waitUntil(usage.clear.isEnabled, timeout=5000)
    label = next(w for w in page.findChildren(QLabel) if "&disk" in w.text())
    assert label.buddy() is page.disk_budget and "&l" in usage.clear.text().lower()
    chain, w = [], page.nextInFocusChain()
    while w is not page and len(chain) < 200:
        if page.isAncestorOf(w) and w.focusPolicy() & Qt.FocusPolicy.TabFocus:
            chain.append(w)
        w = w.nextInFocusChain()
    assert page.disk_budget in chain and usage.clear in chain
    assert chain.index(usage.clear) > chain.index(page.disk_budget)
    usage.clear.click()
    qtbot.waitUntil(lambda: usage.confirm is not None and usage.confirm.isVisible(), timeout=3000)
    usage.confirm.reject()  # Esc / Cancel: nothing removed
    qtbot.waitUntil(lambda: usage.confirm is None, timeout=3000)
    assert usage.label.text() == "4 KB in 1 snapshot" and len(SnapshotDir(tmp_path / "kv").entries()) == 1


def test_clear_asks_then_removes_every_snapshot_and_the_figure_refreshes(qtbot, tmp_path):
    folder = _snapshots(tmp_path, [2048, 4096, 1 << 20])
    stale = folder.root / ".conv0--00ff.kvsnap.tmp123"  # a write cut short
    stale.write_bytes(b"x")
    dlg = _dialog(qtbot, Settings(), folder)
    usage = dlg.tabs.currentWidget().disk_usage
    qtbot.waitUntil(lambda: usage.label.text() == "1.0 MB in 3 snapshots", timeout=5000)
    usage.clear.click()
    box = usage.confirm
    assert box is not None and box.defaultButton() == box.button(QMessageBox.StandardButton.Cancel)
    box.grab().save(str(SHOTS / "diskapp-clear-confirm.png"))
    assert len(folder.entries()) == 3  # nothing before the answer
    clear = next(b for b in box.buttons() if box.buttonRole(b) == QMessageBox.ButtonRole.DestructiveRole)
    clear.click()
    qtbot.waitUntil(lambda: usage.label.text() == "Nothing saved yet", timeout=5000)
    assert folder.entries() == [] and not usage.clear.isEnabled()
    assert not os.path.exists(folder.root / "conv0--0000.kvsnap")
