"""The list half of the Recordings page: search, a sortable table, Open / Export / Delete, and a
friendly empty state that says what gets recorded. File work runs in the background. While shown,
it rescans when a recording starts or ends (the recorder's live folders, checked every second)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Iterable

from PySide6.QtCore import QStandardPaths, Qt, QTimer, Signal
from PySide6.QtGui import QPalette, QShortcut
from PySide6.QtWidgets import (
    QFileDialog, QHBoxLayout, QHeaderView, QLabel, QLineEdit, QMessageBox, QPushButton,
    QStackedWidget, QVBoxLayout, QWidget,
)

from desktop.recording.library import Summary, delete, export_zip, live_names, scan
from desktop.safefile import human_size
from desktop.ui.icons import nav_icon
from desktop.ui.page_title import page_title
from desktop.ui.plain import plain
from desktop.ui.shortcuts import sequence
from desktop.ui.tables import read_only_table
from desktop.ui.recordings.background import Background
from desktop.ui.recordings.format import clock_text
from desktop.ui.recordings.list_model import (
    DATE, FIRST_WORDS, SUMMARY_ROLE, TITLE, RecordingsFilter, RecordingsModel, title_of,
)

EMPTY_TEXT = ("When recording is on (Settings → Recording), every call is kept here: what you both said, "
              "both voices and the camera's frames, with the latency of each turn. Chats are recorded too "
              "if you turn that on. Recordings stay on this computer and clean themselves up by age and size.")
LIVE_DELETE = "This recording is still going on; it can be deleted once it has ended."
LIVE_POLL_MS = 1000  # how often a shown list asks whether a recording started or ended


def zip_name(s: Summary) -> str:
    stem = re.sub(r"[^\w\- ]+", "", title_of(s)).strip()[:60] or s.name
    return f"{stem}.zip"


class EmptyState(QWidget):
    settings_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setAlignment(Qt.AlignmentFlag.AlignCenter)
        layout.setSpacing(14)
        picture = QLabel()
        picture.setPixmap(nav_icon("recordings", self.palette().color(QPalette.ColorRole.PlaceholderText)).pixmap(64, 64))
        heading = QLabel("No recordings yet")
        font = heading.font()
        font.setPointSizeF(font.pointSizeF() * 1.5)
        font.setBold(True)
        heading.setFont(font)
        body = QLabel(EMPTY_TEXT)
        body.setWordWrap(True)
        body.setAlignment(Qt.AlignmentFlag.AlignCenter)
        body.setFixedWidth(460)
        body.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.button = QPushButton("Recording settings…")
        self.button.clicked.connect(self.settings_requested)
        for widget in (picture, heading, body, self.button):
            layout.addWidget(widget, 0, Qt.AlignmentFlag.AlignHCenter)
        self.body = body


class ListPanel(QWidget):
    """Emits `open_requested(folder)`, `settings_requested` and `status(text)`. `refresh()` rescans
    the root in the background; `export_selected(dest)` and `delete_selected()` act on the selection.
    `live()`: the folders being recorded now (cheap: it is asked every second while shown)."""

    open_requested = Signal(Path)
    settings_requested = Signal()
    status = Signal(str)

    def __init__(self, root: Callable[[], Path], live: Callable[[], Iterable[Path]] = lambda: (),
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._root, self._live = root, live
        self.scanned_live: frozenset[str] = frozenset()  # the live folders the last scan was told of
        self._scans = 0  # a scan's answer is used only if no later scan was asked for
        self.live_timer = QTimer(self)
        self.live_timer.setInterval(LIVE_POLL_MS)
        self.live_timer.timeout.connect(self.check_live)
        self.background = Background(self)
        self.model = RecordingsModel(self)
        self.proxy = RecordingsFilter(self)
        self.proxy.setSourceModel(self.model)
        self.dialog: QWidget | None = None  # the confirmation or file dialog open now (tests answer it)

        self.search = QLineEdit()
        self.search.setPlaceholderText("Search titles and first words")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self._search)
        self.open_button = QPushButton("Open")
        self.export_button = QPushButton("Export as zip…")
        self.delete_button = QPushButton("Delete…")
        self.open_button.clicked.connect(self.open_selected)
        self.export_button.clicked.connect(lambda: self.export_selected())
        self.delete_button.clicked.connect(self.delete_selected)
        self.open_button.setDefault(True)
        heading = page_title("Recordings")
        top = QHBoxLayout()
        top.addWidget(heading)
        top.addSpacing(12)
        top.addWidget(self.search, 1)
        for button in (self.open_button, self.export_button, self.delete_button):
            top.addWidget(button)

        table = self.table = read_only_table(self.proxy)
        table.setSortingEnabled(True)
        table.sortByColumn(DATE, Qt.SortOrder.DescendingOrder)
        header = table.horizontalHeader()
        header.setSectionResizeMode(TITLE, QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(FIRST_WORDS, QHeaderView.ResizeMode.Stretch)
        table.setColumnWidth(TITLE, 260)
        table.doubleClicked.connect(lambda _index: self.open_selected())
        table.activated.connect(lambda _index: self.open_selected())
        table.selectionModel().selectionChanged.connect(self._update_buttons)
        self.proxy.modelReset.connect(self._update_buttons)
        QShortcut(sequence("delete_recording"), table, self.delete_selected, context=Qt.ShortcutContext.WidgetShortcut)
        QShortcut(sequence("refresh_recordings"), self, self.refresh,
                  context=Qt.ShortcutContext.WidgetWithChildrenShortcut)
        self.no_match = QLabel()
        self.no_match.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.no_match.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.no_match.hide()

        self.empty = EmptyState()
        self.empty.settings_requested.connect(self.settings_requested)
        listing = QWidget()
        col = QVBoxLayout(listing)
        col.setContentsMargins(16, 14, 16, 12)
        col.setSpacing(10)
        col.addLayout(top)
        col.addWidget(table, 1)
        col.addWidget(self.no_match)
        looking = QLabel("Looking for recordings…")
        looking.setAlignment(Qt.AlignmentFlag.AlignCenter)
        looking.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.stack = QStackedWidget()
        self.stack.addWidget(listing)
        self.stack.addWidget(self.empty)
        self.stack.addWidget(looking)  # until the first scan has answered
        self.stack.setCurrentIndex(2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.stack)
        self._update_buttons()

    # ------------------------------------------------------------------ listing

    @property
    def root(self) -> Path:
        return self._root()

    def refresh(self) -> None:
        """Rescan the recordings folder (in the background); the selection is kept."""
        self.scanned_live = live_names(self._live())
        self._scans += 1
        ask = self._scans
        self.background.run(scan, lambda rows, error: ask == self._scans and self._scanned_rows(rows, error),
                            self.root, self.scanned_live)

    def check_live(self) -> None:
        """Rescan when a recording started or ended since the last scan (its row changes); else
        let a live call's time tick on."""
        if live_names(self._live()) != self.scanned_live:
            self.refresh()
        else:
            self.model.tick()

    def _scanned_rows(self, rows: list[Summary] | None, error: BaseException | None) -> None:
        if error is not None:
            self.status.emit(f"Could not list the recordings: {error}")
            return
        selected = self.selected()
        self.model.set_rows(rows or [])
        self.stack.setCurrentIndex(0 if self.model.rows else 1)
        if selected is not None:
            self.select(selected.folder)
        if self.selected() is None and self.proxy.rowCount():
            self.table.selectRow(0)
        self._search(self.search.text())

    def showEvent(self, event) -> None:  # type: ignore[no-untyped-def]
        super().showEvent(event)
        self.refresh()  # a call may have ended since
        self.live_timer.start()

    def hideEvent(self, event) -> None:  # type: ignore[no-untyped-def]
        self.live_timer.stop()
        super().hideEvent(event)

    def _search(self, text: str) -> None:
        self.proxy.set_search(text)
        hidden = bool(self.model.rows) and self.proxy.rowCount() == 0
        self.no_match.setText(f"No recording matches “{text.strip()}”." if hidden else "")
        self.no_match.setVisible(hidden)
        self._update_buttons()

    def selected(self) -> Summary | None:
        rows = self.table.selectionModel().selectedRows()
        return self.proxy.data(rows[0], SUMMARY_ROLE) if rows else None

    def select(self, folder: Path) -> bool:
        for row in range(self.proxy.rowCount()):
            if self.proxy.data(self.proxy.index(row, 0), SUMMARY_ROLE).folder == folder:
                self.table.selectRow(row)
                return True
        return False

    def _update_buttons(self, *_args: object) -> None:
        s = self.selected()
        for button in (self.open_button, self.export_button):
            button.setEnabled(s is not None)
        self.delete_button.setEnabled(s is not None and not s.live)
        self.delete_button.setToolTip(LIVE_DELETE if s is not None and s.live else "")

    # ------------------------------------------------------------------ actions

    def open_selected(self) -> None:
        s = self.selected()
        if s is not None:
            self.open_requested.emit(s.folder)

    def delete_selected(self) -> QMessageBox | None:
        """Ask (window-modal, no nested loop), then delete in the background. Returns the box."""
        s = self.selected()
        if s is None:
            return None
        if s.live:  # its recorder still writes there
            self.status.emit(LIVE_DELETE)
            return None
        box = QMessageBox(QMessageBox.Icon.Question, "Delete recording", f"Delete “{title_of(s)}”?",
                          QMessageBox.StandardButton.Cancel, self)
        plain(box)
        box.setInformativeText(f"Its {clock_text(s.duration)} of transcript, audio and frames "
                               f"({human_size(s.size)}) are removed from this computer; this cannot be undone.")
        box.addButton("Delete", QMessageBox.ButtonRole.DestructiveRole)
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        box.buttonClicked.connect(
            lambda button: box.buttonRole(button) == QMessageBox.ButtonRole.DestructiveRole and self._delete(s))
        box.finished.connect(box.deleteLater)
        box.finished.connect(lambda _r: setattr(self, "dialog", None))
        self.dialog = box
        box.open()
        return box

    def _delete(self, s: Summary) -> None:
        def done(_result: object, error: BaseException | None) -> None:
            self.status.emit(getattr(error, "message", str(error)) if error else f"Deleted “{title_of(s)}”.")
            self.refresh()

        self.background.run(delete, done, self.root, s.folder)

    def export_selected(self, dest: Path | str | None = None) -> None:
        """Export the selection as a zip at `dest`; without one, ask where (a non-blocking dialog)."""
        s = self.selected()
        if s is None:
            return
        if dest is None:
            start = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.DownloadLocation) or str(Path.home())
            dlg = QFileDialog(self, "Export recording", str(Path(start) / zip_name(s)), "Zip archives (*.zip)")
            dlg.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
            dlg.setDefaultSuffix("zip")
            dlg.fileSelected.connect(lambda path: self.export_selected(path))
            dlg.finished.connect(dlg.deleteLater)
            dlg.finished.connect(lambda _r: setattr(self, "dialog", None))
            self.dialog = dlg
            dlg.open()
            return
        dest = Path(dest)
        self.status.emit(f"Exporting “{title_of(s)}”…")
        self.export_button.setEnabled(False)

        def done(path: Path | None, error: BaseException | None) -> None:
            self._update_buttons()
            self.status.emit(getattr(error, "message", str(error)) if error else f"Exported to {path}")

        self.background.run(export_zip, done, s.folder, dest)
