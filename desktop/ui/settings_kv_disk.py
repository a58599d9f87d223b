"""The "Conversation memory on disk" rows of the Cache settings page: the disk budget for KV
snapshots (in GB; 0 = off), the space they take now, counted off the UI thread, and "Clear",
which asks first."""

from __future__ import annotations

import threading
from typing import Any, Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QDoubleSpinBox, QHBoxLayout, QLabel, QMessageBox, QPushButton, QWidget

from desktop.safefile import human_size
from desktop.settings import Settings
from desktop.ui.settings_form import bounds, field_width

TIP = ("When a conversation leaves the model's memory (other conversations need the room, the model "
       "restarts or Omnidesk closes), its cache is saved on disk, so that going back to it later does not "
       "read the whole conversation again. The oldest unused ones are removed beyond this size; 0 keeps none.")


class DiskBudget(QDoubleSpinBox):
    """The disk budget in GB (one decimal, 0 = "Off"); the setting is in MB."""

    def __init__(self, mb: int) -> None:
        super().__init__()
        low, high, _ = bounds("kv_disk_budget_mb")
        self.setMinimumWidth(field_width(self))
        self.setDecimals(1)
        self.setRange(low / 1024, high / 1024)
        self.setSingleStep(0.5)
        self.setSuffix(" GB")
        self.setSpecialValueText("Off")
        self.setValue(mb / 1024)
        self.setToolTip(TIP)
        self.setAccessibleName("Conversation memory on disk, in gigabytes")

    def mb(self) -> int:
        return round(self.value() * 1024)


class DiskUsage(QWidget):
    """"412 MB in 23 snapshots" and the "Clear…" button beside it. `snapshots` is the folder
    (kv_disk.files.SnapshotDir: entries(), clear()); None: nothing to show (a test, no app).
    Counting and clearing run on a thread; `counted` brings the figures back (queued)."""

    counted = Signal(int, int)  # bytes, snapshots
    cleared = Signal(int)  # snapshots removed

    def __init__(self, snapshots: Any, *, run: Callable[[Callable[[], None]], None] | None = None) -> None:
        super().__init__()
        self._snapshots = snapshots
        self._run = run or _on_a_thread
        self.confirm: QMessageBox | None = None
        self._size = 0  # bytes in use, as last counted
        self.label = QLabel("Counting…")
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.label.setMinimumWidth(self.label.fontMetrics().horizontalAdvance("999.9 MB in 9999 snapshots  "))
        self.clear = QPushButton("C&lear…")
        self.clear.setToolTip("Remove every conversation's cache saved on disk (your conversations stay). "
                              "Their next turn reads them again from the start.")
        self.clear.clicked.connect(self.ask_clear)
        self.clear.setEnabled(False)  # until counted: nothing to clear yet, perhaps
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.label)
        row.addWidget(self.clear)
        row.addStretch(1)
        self.counted.connect(self._show)
        self.cleared.connect(self._after_clear)
        if snapshots is None:
            self.label.setText("Not available here")
        else:
            self.refresh()

    def refresh(self) -> None:
        """Count the snapshots again (off the UI thread)."""
        def count() -> None:
            entries = self._snapshots.entries()
            self._emit(self.counted, sum(e.size for e in entries), len(entries))

        self._run(count)

    def _show(self, size: int, count: int) -> None:
        self._size = size
        if count == 0:
            self.label.setText("Nothing saved yet")
        else:
            self.label.setText(f"{human_size(size)} in {count} snapshot{'s' if count != 1 else ''}")
        self.clear.setEnabled(count > 0)

    def ask_clear(self) -> None:
        """Ask, then remove every snapshot (not exec(): a nested loop breaks the app's qasync loop)."""
        box = self.confirm = QMessageBox(
            QMessageBox.Icon.Question, "Clear the conversation memory on disk",
            "Clear the conversation memory on disk?", QMessageBox.StandardButton.Cancel, self)
        box.setInformativeText(f"Every conversation's cache saved on disk ({human_size(self._size)}) is removed. "
                               "Your conversations are kept; going back to one reads it again from the start.")
        box.addButton("Clear", QMessageBox.ButtonRole.DestructiveRole)
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        box.finished.connect(lambda _: self._answered(box))
        box.open()

    def _answered(self, box: QMessageBox) -> None:
        clicked = box.clickedButton()
        self.confirm = None
        box.deleteLater()
        if clicked is None or box.buttonRole(clicked) != QMessageBox.ButtonRole.DestructiveRole:
            return
        self.label.setText("Clearing…")
        self.clear.setEnabled(False)
        self._run(lambda: self._emit(self.cleared, self._snapshots.clear()))

    def _after_clear(self, _gone: int) -> None:
        self.refresh()

    @staticmethod
    def _emit(signal: Any, *args: Any) -> None:
        try:
            signal.emit(*args)
        except RuntimeError:  # the dialog closed meanwhile: nobody to tell
            pass


def _on_a_thread(work: Callable[[], None]) -> None:
    threading.Thread(target=work, name="kv-disk-usage", daemon=True).start()


def disk_rows(page: Any, s: Settings, snapshots: Any) -> tuple[DiskBudget, DiskUsage]:
    """Add the rows to a settings Page: the budget (its value goes in the page's values()) and
    the space in use with "Clear"."""
    budget = DiskBudget(s.kv_disk_budget_mb)
    page.add("Conversation memory on &disk:", "kv_disk_budget_mb", budget,
             "Conversations that leave memory, or that were open when Omnidesk closed, come back from disk "
             "instead of being read again. Off: no more are saved (Clear removes those there now).")
    usage = DiskUsage(snapshots)
    label = QLabel("In use on disk:")
    label.setBuddy(usage.clear)
    page.form.addRow(label, usage)
    return budget, usage
