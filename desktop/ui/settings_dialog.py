"""The settings dialog: model, cache, sampling, audio, recording, API server and remote workers pages. The form is
validated as one pydantic Settings on OK/Apply; a refused value is named inline and nothing is lost."""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError
from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtWidgets import (
    QComboBox, QDialog, QDialogButtonBox, QGridLayout, QLabel, QLineEdit, QStyle, QTabWidget, QVBoxLayout, QWidget,
)

from desktop.settings import Settings
from desktop.ui.settings_call import CallsPage
from desktop.ui.settings_form import Page, hint
from desktop.ui.settings_pages import ApiPage, AudioPage, CachePage, ModelPage, RecordingPage, SamplingPage
from desktop.ui.settings_remote import RemotePage
from desktop.ui.settings_tools import ToolsPage

log = logging.getLogger(__name__)
RELOAD_NOTE = "Changing the model, device, workers or cache reloads the model."
ERROR_STYLE = "color: #d32f2f; font-weight: 600;"


class SettingsDialog(QDialog):
    """Edit a Settings. Open it with open() (never exec() under qasync) and listen to `applied`;
    `page` names the page (its tab's title) to open on, else the first (Model); `snapshots`: the folder of
    KV snapshots on disk (kv_disk.files.SnapshotDir), whose space in use and "Clear" the Cache page shows.

    `applied(Settings)` is emitted on OK or Apply when the validated settings differ from those in
    effect; `result_settings()` gives the accepted settings after OK (None before OK or on Cancel)."""

    applied = Signal(object)

    def __init__(self, settings: Settings, parent: QWidget | None = None, *,
                 sound_devices: Any = None, api_status: Any = None, page: str | None = None,
                 snapshots: Any = None, tools: Any = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self._current = settings  # what is in effect: the initial settings, then the last applied
        self._result: Settings | None = None
        self.model_page = ModelPage(settings)
        self.api_page = ApiPage(settings, api_status)
        self.pages: list[Page] = [
            self.model_page, CachePage(settings, snapshots), SamplingPage(settings),
            AudioPage(settings, sound_devices if sound_devices is not None else []), CallsPage(settings),
            RecordingPage(settings), self.api_page,
            RemotePage(settings), ToolsPage(settings, tools),
        ]
        layout = QVBoxLayout(self)  # children in visual order: the focus chain follows it
        self.tabs = QTabWidget(self)
        for form in self.pages:
            self.tabs.addTab(form, form.title)
            form.changed.connect(self._changed)
        layout.addWidget(self.tabs, 1)

        buttons = QDialogButtonBox.StandardButton
        self.buttons = QDialogButtonBox(buttons.Ok | buttons.Cancel | buttons.Apply, self)
        self.ok_button = self.buttons.button(buttons.Ok)
        self.ok_button.setDefault(True)  # Enter = OK wherever the focus is (parented: the dialog knows)
        self.apply_button = self.buttons.button(buttons.Apply)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        self.apply_button.clicked.connect(self.apply)
        layout.addWidget(self.buttons)

        # One status line under the buttons, its room kept so the pages never jump or squash:
        # a refused value in red, else the reload note in grey.
        self.error = QLabel(self)
        self.error.setTextFormat(Qt.TextFormat.PlainText)  # the message may quote what the user typed
        self.error.setStyleSheet(ERROR_STYLE)
        self.error.setWordWrap(True)
        self.error.setAccessibleName("Settings error")
        self.reload_note = hint(RELOAD_NOTE)
        status = QGridLayout()
        for label in (self.error, self.reload_note):
            policy = label.sizePolicy()
            policy.setRetainSizeWhenHidden(True)
            label.setSizePolicy(policy)
            label.hide()
            status.addWidget(label, 0, 0)
        layout.addLayout(status)

        tabs = self.tabs.tabBar().sizeHint().width() + 2 * self.tabs.style().pixelMetric(
            QStyle.PixelMetric.PM_DefaultFrameWidth) + layout.contentsMargins().left() + layout.contentsMargins().right()
        size = QSize(max(self.sizeHint().width(), 640, tabs), self.sizeHint().height())  # every tab in sight
        self.setMinimumSize(size)
        self.resize(size)
        self._changed()
        if page:
            self.show_page(page)

    # public API

    def show_page(self, title: str) -> bool:
        """Bring the page with this title ("Model", "Recording", …) to the front; False (and the
        page shown stays) when there is none."""
        for i, page in enumerate(self.pages):
            if page.title == title:
                self.tabs.setCurrentIndex(i)
                return True
        log.warning("The settings dialog has no page %r", title)
        return False

    def current_page(self) -> str:
        """The title of the page in front."""
        return self.pages[self.tabs.currentIndex()].title

    def result_settings(self) -> Settings | None:
        """The settings accepted with OK; None while the dialog is open or after Cancel."""
        return self._result

    def show_api_status(self, status: Any) -> None:
        """The local API server's live state (desktop.api.server.ApiStatus), on the API page."""
        self.api_page.show_status(status)

    def apply(self) -> bool:
        """Validate the form; if it is valid and changed, make it current and emit `applied`."""
        new = self._validate()
        if new is None:
            return False
        if new != self._current:
            self._current = new
            self.applied.emit(new)
        self._changed()
        return True

    def accept(self) -> None:
        if self.apply():
            self._result = self._current
            super().accept()

    def reject(self) -> None:
        self._result = None
        super().reject()

    # form state

    def form_values(self) -> dict[str, Any]:
        """Every Settings field: the form's raw values over the current settings (kept for the rest)."""
        data = self._current.model_dump()
        for page in self.pages:
            data.update(page.values())
        return data

    def needs_reload(self) -> bool:
        """Whether the form, once applied, reloads the model (no validation: raw values compared)."""
        return self._current.needs_reload(Settings.model_construct(**self.form_values()))

    def _changed(self) -> None:
        self.error.hide()
        self.apply_button.setEnabled(self.form_values() != self._current.model_dump())
        self.reload_note.setVisible(self.needs_reload())

    def _validate(self) -> Settings | None:
        try:
            new = Settings.model_validate(self.form_values())
        except ValidationError as exc:
            err = exc.errors()[0]
            key = str(err["loc"][0]) if err["loc"] else ""
            self._refuse(key, _plain(key, err))
            return None
        problem = self.model_page.problem() if new.model_source != self._current.model_source else None
        if problem:  # (a path kept as it was is not checked again: other settings can still change)
            self._refuse("model_source", problem)
            return None
        return new

    def _refuse(self, key: str, message: str) -> None:
        """Show why in red, bring the field's page forward and put the cursor in the field."""
        page = next((p for p in self.pages if key in p.fields), None)
        label = page.labels[key] if page else key.replace("_", " ").capitalize()
        self.error.setText(f"{label}: {message}")
        extra = self.error.heightForWidth(self.error.width()) - self.error.height()
        if extra > 0:  # a long message (a long path) wraps: grow rather than squash the page
            self.resize(self.width(), self.height() + extra)
        self.reload_note.hide()
        self.error.show()
        if page is None:
            return
        self.tabs.setCurrentWidget(page)
        widget = page.fields[key]
        widget.setFocus()
        edit = widget.lineEdit() if isinstance(widget, QComboBox) else widget
        if isinstance(edit, QLineEdit):
            edit.selectAll()


def _plain(key: str, err: dict[str, Any]) -> str:
    """A pydantic error in plain words: "must be cpu, cuda or cuda:N (you entered “gpu7”)."."""
    msg = str(err.get("msg", "is not valid"))
    for prefix in ("Value error, ", "Input "):
        msg = msg.removeprefix(prefix)
    name = key.replace("_", " ")
    if msg.lower().startswith(name + " "):
        msg = msg[len(name) + 1:]
    value = err.get("input")
    if value not in (None, "") and not isinstance(value, (dict, list)):
        msg += f" (you entered “{value}”)"
    return msg.rstrip(".") + "."
