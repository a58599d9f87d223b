"""The keyboard shortcuts, listed once: the main window builds its actions from this table, the
chat widgets match their keys against it, and Help → Keyboard shortcuts shows the same table, so
what is bound and what the help says can never disagree."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QKeyCombination, QSize, Qt
from PySide6.QtGui import QGuiApplication, QKeyEvent, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView, QDialog, QDialogButtonBox, QHeaderView, QStyle, QTableWidget, QTableWidgetItem,
    QVBoxLayout, QWidget,
)


@dataclass(frozen=True, slots=True)
class Shortcut:
    action: str  # key of the action in MainWindow.actions, or of the widget's own key
    keys: str  # portable text, e.g. "Ctrl+N"; "Enter" is Return and the keypad's Enter alike
    text: str  # what it does, shown in menus and the help
    grab: bool = True  # False: only shown; the focused widget handles the key itself
    owner: str = "window"  # "window": a main-window action; else the widget that binds it itself
    group: str = "General"  # the help's section
    menu: str = ""  # its item in the menu bar, where that differs from `text` ("": `text`)

    @property
    def in_menu_bar(self) -> bool:
        """A main-window action (bound there), or a widget's key the menu bar shows as well."""
        return self.owner == "window" or bool(self.menu)


SHORTCUTS = (
    Shortcut("new_chat", "Ctrl+N", "New chat", group="Chat"),
    Shortcut("search", "Ctrl+F", "Search conversations", group="Chat"),
    # Esc is not grabbed window-wide: the composer uses it too (stop, or cancel an edit); the chat
    # page and the main window act on an Esc that no focused widget took.
    Shortcut("stop", "Esc", "Stop the reply", grab=False, group="Chat"),
    Shortcut("send", "Enter", "Send the message", owner="composer", group="Chat"),
    Shortcut("newline", "Shift+Enter", "New line in the message", owner="composer", group="Chat"),
    # The Tools switch's mnemonic (shown only when MCP servers are set up).
    Shortcut("tools", "Alt+T", "Offer the MCP servers' tools in this chat: on or off", owner="tools", group="Chat"),
    # The Voice button binds its key (shown only when there is a voice); the Chat menu shows it.
    Shortcut("voice", "Ctrl+Shift+V", "Speak replies aloud: on or off", owner="voice", group="Chat",
             menu="Speak replies aloud"),
    # F2 is the window's (Chat → Rename, from anywhere on the chat page); Del stays the list's own
    # key (window-wide it would take Del from other pages' lists), the Chat menu only shows it.
    Shortcut("rename", "F2", "Rename the selected conversation", group="Conversation list",
             menu="Rename conversation"),
    Shortcut("delete", "Del", "Delete the selected conversation…", owner="list", group="Conversation list",
             menu="Delete conversation…"),
    Shortcut("clear_search", "Esc", "In the search box: clear the search (again: back to the message)",
             owner="search", group="Conversation list"),
    Shortcut("call", "Ctrl+Enter", "Start or end the call", owner="call", group="Call"),
    Shortcut("push_to_talk", "Space", "Hold to talk (push-to-talk mode)", grab=False, owner="call", group="Call"),
    Shortcut("camera", "Ctrl+Shift+C", "Camera on or off (during a call)", owner="call", group="Call"),
    Shortcut("play", "Space", "Play or pause the recording", owner="viewer", group="Recordings"),
    Shortcut("seek_back", "Left", "Back 5 seconds", owner="viewer", group="Recordings"),
    Shortcut("seek_forward", "Right", "Forward 5 seconds", owner="viewer", group="Recordings"),
    Shortcut("seek_start", "Home", "Go to the start", owner="viewer", group="Recordings"),
    Shortcut("seek_end", "End", "Go to the end", owner="viewer", group="Recordings"),
    Shortcut("zoom_in", "+", "Zoom the timeline in", owner="viewer", group="Recordings"),
    Shortcut("zoom_out", "-", "Zoom the timeline out", owner="viewer", group="Recordings"),
    Shortcut("back_to_list", "Esc", "Back to the recordings list", owner="viewer", group="Recordings"),
    Shortcut("delete_recording", "Del", "Delete the selected recording…", owner="recordings", group="Recordings"),
    Shortcut("refresh_recordings", "F5", "Refresh the recordings list", owner="recordings", group="Recordings"),
    Shortcut("refresh_models", "F5", "Look for models on disk again", owner="models", group="Models"),
    Shortcut("page_chat", "Ctrl+1", "Go to Chat"),
    Shortcut("page_call", "Ctrl+2", "Go to Call"),
    Shortcut("page_recordings", "Ctrl+3", "Go to Recordings"),
    Shortcut("page_admin", "Ctrl+4", "Go to Admin"),
    Shortcut("page_models", "Ctrl+5", "Go to Models"),
    Shortcut("settings", "Ctrl+,", "Settings…"),
    Shortcut("shortcuts", "F1", "Keyboard shortcuts"),
    Shortcut("quit", "Ctrl+Q", "Quit"),
)
GROUPS = ("Chat", "Conversation list", "Call", "Recordings", "Models", "General")


def find(action: str) -> Shortcut:
    """The table's entry for `action` (KeyError for an unknown one)."""
    for sc in SHORTCUTS:
        if sc.action == action:
            return sc
    raise KeyError(action)


def window_shortcuts() -> tuple[Shortcut, ...]:
    """The entries the main window turns into actions (it binds the keys of those it owns)."""
    return tuple(sc for sc in SHORTCUTS if sc.in_menu_bar)


def binds(shortcut: Shortcut) -> bool:
    """Whether the main window's action binds the key (else its menu item only shows it)."""
    return shortcut.owner == "window" and shortcut.grab


def sequence(shortcut: Shortcut | str) -> QKeySequence:
    """The key sequence of an entry (or of the entry named by an action)."""
    return QKeySequence((find(shortcut) if isinstance(shortcut, str) else shortcut).keys)


def native(shortcut: Shortcut | str) -> str:
    """The keys as this platform names them, e.g. "Ctrl+Shift+V" (⌃⇧V on a Mac)."""
    return sequence(shortcut).toString(QKeySequence.SequenceFormat.NativeText)


def matches(event: QKeyEvent, action: str) -> bool:
    """Whether a key press is the table's key for `action` (Return counts as Enter)."""
    key = Qt.Key.Key_Enter if event.key() == Qt.Key.Key_Return else Qt.Key(event.key())
    mods = event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier
    return QKeySequence(QKeyCombination(mods, key)) == sequence(action)


class ShortcutsDialog(QDialog):
    """A read-only table of every entry of SHORTCUTS, in sections, in the platform's key names.
    Show with open()."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Keyboard shortcuts")
        rows: list[tuple[str, str, bool]] = []  # keys, text, is a section heading
        for group in GROUPS:
            rows.append(("", group, True))
            rows += [(native(sc), sc.text.rstrip("…"), False) for sc in SHORTCUTS if sc.group == group]
        table = QTableWidget(len(rows), 2, self)
        table.setHorizontalHeaderLabels(["Shortcut", "Action"])
        table.horizontalHeader().hide()
        table.verticalHeader().hide()
        table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        table.setShowGrid(False)
        table.setWordWrap(False)
        rows_header = table.verticalHeader()
        rows_header.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        rows_header.setDefaultSectionSize(table.fontMetrics().height() + 8)
        self.headings: list[int] = []
        for row, (keys, text, heading) in enumerate(rows):
            if heading:
                item = QTableWidgetItem(text)
                font = item.font()
                font.setBold(True)
                item.setFont(font)
                table.setItem(row, 0, item)
                table.setSpan(row, 0, 1, 2)
                if row:
                    table.setRowHeight(row, rows_header.defaultSectionSize() + 8)  # air above a section
                item.setTextAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignBottom)
                self.headings.append(row)
            else:
                table.setItem(row, 0, QTableWidgetItem(keys))
                table.setItem(row, 1, QTableWidgetItem(text))
        header = table.horizontalHeader()
        header.setStretchLastSection(True)
        table.setColumnWidth(0, table.sizeHintForColumn(0) + 20)
        self.table = table
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(table)
        layout.addWidget(buttons)
        table.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)  # no row jumps
        self.resize(self._fitting_size(parent))
        table.setFocus()  # Page Down / arrows scroll what does not fit

    def _fitting_size(self, parent: QWidget | None) -> QSize:
        """All of the table where there is room (no row cut, no action elided), within the window
        it helps with (and the screen): what does not fit scrolls."""
        table, layout = self.table, self.layout()
        margins = layout.contentsMargins()
        rows = sum(table.rowHeight(r) for r in range(table.rowCount()))
        below = layout.spacing() + self.findChild(QDialogButtonBox).sizeHint().height()
        height = rows + 2 * table.frameWidth() + margins.top() + margins.bottom() + below
        bar = table.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent)
        width = (table.columnWidth(0) + table.sizeHintForColumn(1) + 16 + bar + 2 * table.frameWidth()
                 + margins.left() + margins.right())
        room = QSize(1 << 16, 1 << 16)
        window = parent.window() if parent is not None else None
        if window is not None and window.isVisible():
            room = window.frameGeometry().size() * 0.92
        screen = (parent.screen() if parent is not None else None) or QGuiApplication.primaryScreen()
        if screen is not None:
            room = room.boundedTo(screen.availableGeometry().size() * 0.92)
        return QSize(max(min(width, room.width()), 360), max(min(height, room.height()), 240))

    def listed(self) -> dict[str, str]:
        """What the help shows: the keys of each action's text (section headings left out)."""
        return {self.table.item(r, 1).text(): self.table.item(r, 0).text()
                for r in range(self.table.rowCount()) if r not in self.headings}
