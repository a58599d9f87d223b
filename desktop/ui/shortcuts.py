"""The keyboard shortcuts, listed once: the main window builds its actions from this table and
Help → Keyboard shortcuts shows the same table, so the two can never disagree."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView, QDialog, QDialogButtonBox, QHeaderView, QTableWidget, QTableWidgetItem,
    QVBoxLayout, QWidget,
)


@dataclass(frozen=True, slots=True)
class Shortcut:
    action: str  # key of the action in MainWindow.actions
    keys: str  # portable text, e.g. "Ctrl+N"
    text: str  # what it does, shown in menus and the help
    grab: bool = True  # False: only shown; the focused widget handles the key itself


SHORTCUTS = (
    Shortcut("new_chat", "Ctrl+N", "New chat"),
    Shortcut("search", "Ctrl+F", "Search conversations"),
    # Esc is not grabbed window-wide: the composer uses it too (stop, or cancel an edit); the chat
    # page and the main window act on an Esc that no focused widget took.
    Shortcut("stop", "Esc", "Stop the reply", grab=False),
    Shortcut("page_chat", "Ctrl+1", "Go to Chat"),
    Shortcut("page_call", "Ctrl+2", "Go to Call"),
    Shortcut("page_recordings", "Ctrl+3", "Go to Recordings"),
    Shortcut("page_admin", "Ctrl+4", "Go to Admin"),
    Shortcut("settings", "Ctrl+,", "Settings…"),
    Shortcut("shortcuts", "F1", "Keyboard shortcuts"),
    Shortcut("quit", "Ctrl+Q", "Quit"),
)


def sequence(shortcut: Shortcut) -> QKeySequence:
    return QKeySequence(shortcut.keys)


class ShortcutsDialog(QDialog):
    """A read-only two-column table of SHORTCUTS in the platform's key names. Show with open()."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Keyboard shortcuts")
        table = QTableWidget(len(SHORTCUTS), 2, self)
        table.setHorizontalHeaderLabels(["Shortcut", "Action"])
        table.verticalHeader().hide()
        table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        table.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        table.setShowGrid(False)
        table.setAlternatingRowColors(True)
        for row, sc in enumerate(SHORTCUTS):
            keys = sequence(sc).toString(QKeySequence.SequenceFormat.NativeText)
            table.setItem(row, 0, QTableWidgetItem(keys))
            table.setItem(row, 1, QTableWidgetItem(sc.text.rstrip("…")))
        header = table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self.table = table
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(table)
        layout.addWidget(buttons)
        self.resize(380, 400)
