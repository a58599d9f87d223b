"""The left pane of the chat page: New conversation, a search box (titles and message text), and
the saved conversations with their dates (Esc in the search box clears it); rename with a double-click or F2, and a context menu
with Rename (F2), Export… and Delete (Del), its keys shown."""

from __future__ import annotations

from typing import Sequence

from PySide6.QtCore import QPoint, Qt, QTimer, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QLabel,
    QLineEdit,
    QListView,
    QMenu,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from desktop.chat.conversations import Conversation
from desktop.chat.search import Hit
from desktop.ui import shortcuts
from desktop.ui.chat.conversation_delegate import ConversationDelegate
from desktop.ui.chat.conversation_model import ConversationListModel
from desktop.ui.style import muted

SEARCH_DELAY_MS = 150


class _ListView(QListView):
    delete_pressed = Signal()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if self.state() != QAbstractItemView.State.EditingState:
            if shortcuts.matches(event, "delete"):
                self.delete_pressed.emit()
                return
            # F2 is the main window's action (Chat → Rename); this serves the list without one
            if shortcuts.matches(event, "rename") and self.currentIndex().isValid():
                self.edit(self.currentIndex())
                return
        super().keyPressEvent(event)


class _SearchBox(QLineEdit):
    """Esc clears the search (the list shows every conversation again); on an empty box it emits
    `left`: the page gives the keys back to the message box."""

    left = Signal()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if shortcuts.matches(event, "clear_search"):
            if self.text():
                self.clear()
            else:
                self.left.emit()
            return
        super().keyPressEvent(event)


class ConversationList(QWidget):
    """Emits what the user asks for; the page changes the store and calls `set_conversations`."""

    selected = Signal(str)
    new_requested = Signal()
    search_changed = Signal(str)
    rename_requested = Signal(str, str)
    delete_requested = Signal(str)
    export_requested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._quiet = False  # True while the selection is set by code, not by the user
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 10, 4, 8)
        layout.setSpacing(6)
        self.new_button = QPushButton("+  New conversation")
        self.new_button.setToolTip("Start a new conversation")
        self.new_button.clicked.connect(self.new_requested)
        layout.addWidget(self.new_button)
        self.search = _SearchBox()
        self.search.setPlaceholderText("Search titles and messages")
        self.search.setClearButtonEnabled(True)
        # typing searches once the keys pause (each search scans every message); clearing is at once
        self._search_timer = QTimer(self, singleShot=True, interval=SEARCH_DELAY_MS, timeout=self.flush_search)
        self.search.textChanged.connect(lambda text: self._search_timer.start() if text.strip() else self.flush_search())
        layout.addWidget(self.search)
        self.model = ConversationListModel(self)
        # queued: the page re-reads the list after the editor has closed and handed the focus back
        # to the list (a model reset while the editor commits destroys it, and the focus moved on)
        self.model.rename_requested.connect(self.rename_requested, Qt.ConnectionType.QueuedConnection)
        self.view = _ListView()
        self.view.setModel(self.model)
        self.view.setItemDelegate(ConversationDelegate(self.view))
        self.view.setUniformItemSizes(True)
        self.view.setEditTriggers(QAbstractItemView.EditTrigger.DoubleClicked | QAbstractItemView.EditTrigger.EditKeyPressed)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.view.customContextMenuRequested.connect(self._menu)
        self.view.selectionModel().currentChanged.connect(self._current_changed)
        self._pressed_new = False  # the press of this click made its row current (and opened it)
        self.view.clicked.connect(self._clicked)
        self.view.delete_pressed.connect(lambda: self.current_id() and self.delete_requested.emit(self.current_id()))
        layout.addWidget(self.view, 1)
        self.empty = QLabel("No conversations yet")
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setStyleSheet(f"color: {muted(self).name()};")
        layout.addWidget(self.empty)

    def set_conversations(self, convs: Sequence[Conversation | Hit], current_id: str | None) -> None:
        """Show `convs` (or search hits) with `current_id` selected (none when it is not among them)."""
        self._quiet = True
        try:
            self.model.set_conversations(convs)
            self.select(current_id)
        finally:
            self._quiet = False
        searching = bool(self.search.text().strip())
        self.empty.setText("No matching conversations" if searching else "No conversations yet")
        self.empty.setVisible(not convs)

    def set_replying(self, states: dict[str, str]) -> None:
        """Mark the conversations whose reply is being written (id → "Replying…" or the like)."""
        self.model.set_replying(states)

    def flush_search(self) -> None:
        """Search for what the box holds now (without waiting for the typing to pause)."""
        self._search_timer.stop()
        self.search_changed.emit(self.search.text())

    def select(self, conv_id: str | None) -> None:
        quiet, self._quiet = self._quiet, True
        try:
            row = self.model.row_of(conv_id)
            if row < 0:
                self.view.clearSelection()
                self.view.setCurrentIndex(self.model.index(-1, 0))
            else:
                self.view.setCurrentIndex(self.model.index(row, 0))
        finally:
            self._quiet = quiet

    def current_id(self) -> str | None:
        return self.model.id_at(self.view.currentIndex().row())

    def neighbour_of(self, conv_id: str) -> str | None:
        """The conversation listed after `conv_id` (before it when it is the last), if any: what
        opens when `conv_id` is deleted."""
        row = self.model.row_of(conv_id)
        if row < 0:
            return None
        after = self.model.id_at(row + 1)
        return after if after is not None else self.model.id_at(row - 1)

    def start_rename(self, conv_id: str) -> None:
        row = self.model.row_of(conv_id)
        if row >= 0:
            self.view.edit(self.model.index(row, 0))

    def _current_changed(self, current, _previous) -> None:
        conv_id = self.model.id_at(current.row())
        self._pressed_new = QApplication.mouseButtons() != Qt.MouseButton.NoButton  # a click is under way
        if conv_id and not self._quiet:
            self.selected.emit(conv_id)

    def _clicked(self, index) -> None:
        """While searching, a click on the row already open opens it again: at the match (a click
        that just made its row current has opened it once already)."""
        if self.search.text().strip() and not self._pressed_new:
            self._current_changed(index, None)
        self._pressed_new = False

    def _menu(self, pos: QPoint) -> None:
        conv_id = self.model.id_at(self.view.indexAt(pos).row())
        if conv_id is None:
            return
        menu = QMenu(self)
        # The keys are shown (also where the platform hides them in context menus); bound to the
        # menu's own actions they work while it is open, when no other shortcut of the window can.
        for text, action, fn in (("Rename", "rename", lambda: self.start_rename(conv_id)),
                                 ("Export…", "", lambda: self.export_requested.emit(conv_id)),
                                 (None, "", None),
                                 ("Delete…", "delete", lambda: self.delete_requested.emit(conv_id))):
            if text is None:
                menu.addSeparator()
                continue
            item = menu.addAction(text, fn)
            if action:
                item.setShortcut(shortcuts.sequence(action))
                item.setShortcutVisibleInContextMenu(True)
        menu.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        menu.popup(self.view.viewport().mapToGlobal(pos))
