"""The left sidebar: one entry per page (Chat, Call, Recordings, Admin, Models) with an icon, the page's
shortcut in its tooltip, and a `page_selected(key)` signal."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QEvent, QSize, Qt, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QAbstractItemView, QFrame, QListWidget, QListWidgetItem, QWidget

from desktop.ui.icons import nav_icon


@dataclass(frozen=True, slots=True)
class Page:
    key: str
    title: str
    tip: str


PAGES = (
    Page("chat", "Chat", "Conversations with the assistant"),
    Page("call", "Call", "Voice calls: talk with the assistant (Ctrl+2)"),
    Page("recordings", "Recordings", "Recorded calls and chats: play them back"),
    Page("admin", "Admin", "Workers, KV slots, queue and cache numbers"),
    Page("models", "Models", "The models on disk: load, unload, download"),
)
KEYS = tuple(p.key for p in PAGES)


class NavBar(QListWidget):
    """Selecting an entry (click, arrow keys, or `select`) emits `page_selected(key)`."""

    page_selected = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("navBar")
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setIconSize(QSize(20, 20))
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFixedWidth(172)
        self.setSpacing(2)
        self.setAccessibleName("Pages")
        for i, page in enumerate(PAGES, start=1):
            item = QListWidgetItem(page.title)
            item.setData(Qt.ItemDataRole.UserRole, page.key)
            item.setToolTip(f"{page.tip}  (Ctrl+{i})")
            item.setSizeHint(QSize(0, 40))
            self.addItem(item)
        self._paint_icons()
        self.currentRowChanged.connect(self._row_changed)

    def select(self, key: str) -> None:
        """Show `key` as the current page (emits page_selected if it changes)."""
        self.setCurrentRow(KEYS.index(key))

    def keyboardSearch(self, search: str) -> None:
        """No type-ahead: a letter typed here must not switch the page behind the user's back
        (arrow keys, clicks and the Ctrl+1… shortcuts do)."""

    def _row_changed(self, row: int) -> None:
        if 0 <= row < len(KEYS):
            self.page_selected.emit(KEYS[row])

    def _paint_icons(self) -> None:
        pal = self.palette()
        color, selected = pal.color(QPalette.ColorRole.WindowText), pal.color(QPalette.ColorRole.HighlightedText)
        for i, page in enumerate(PAGES):
            self.item(i).setIcon(nav_icon(page.key, color, selected))

    def changeEvent(self, event: QEvent) -> None:  # icons follow a light/dark switch
        if event.type() == QEvent.Type.PaletteChange:
            self._paint_icons()
        super().changeEvent(event)
