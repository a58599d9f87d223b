"""The Remote workers page of the settings dialog: the OpenAI-compatible servers (llama.cpp's
server, vLLM, SGLang) that serve chats beside the local model; add one (address, model, key),
checked as it is added, remove the selected one, or ask a server whether it answers (on a thread:
the dialog never waits for the network)."""

from __future__ import annotations

import asyncio
import threading

from pydantic import ValidationError
from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QAbstractItemView, QHBoxLayout, QHeaderView, QLabel, QLineEdit, QPushButton, QTableWidget, QTableWidgetItem,
)

from desktop.settings import RemoteWorker, Settings
from desktop.ui.settings_form import Page, hint
from desktop.workers.remote.probe import Unreachable, check_server
from desktop.workers.remote.spec import RemoteSpec

ERROR_STYLE = "color: #d32f2f;"
OK_STYLE = "color: #2e7d32;"


class ServerCheck(QObject):
    """Looks at one server on a thread; `finished(text, ok)` comes back on the Qt thread."""

    finished = Signal(str, bool)

    def start(self, spec: RemoteSpec) -> None:
        threading.Thread(target=self._run, args=(spec,), name="remote-check", daemon=True).start()

    def _run(self, spec: RemoteSpec) -> None:
        try:
            info = asyncio.run(check_server(spec))
            context = f" · {info.context_length:,}-token context" if info.context_length else ""
            text, ok = f"{spec.url} answers: {info.name} · {info.slots} slot(s){context}.", True
        except Unreachable as exc:
            text, ok = f"{spec.url} does not answer: {exc}.", False
        except Exception as exc:  # never a traceback in a settings page
            text, ok = f"{spec.url} could not be checked: {type(exc).__name__}: {exc}.", False
        try:
            self.finished.emit(text, ok)
        except RuntimeError:  # the dialog was closed meanwhile
            pass
COLUMNS = ("Address", "Model", "API key")


class RemotePage(Page):
    """`workers` holds what the table shows, in order; values() gives them as Settings dicts."""

    def __init__(self, s: Settings) -> None:
        super().__init__("Remote workers")
        self.workers: list[RemoteWorker] = list(s.remote_workers)
        intro = hint("OpenAI-compatible servers (llama.cpp's server, vLLM, SGLang) that answer chats beside "
                     "the local model. A conversation stays on the server that holds it, so its prompt cache "
                     "is reused. Servers join or leave as soon as you apply, without reloading the model; "
                     "the Admin page shows whether each one answers.")
        self.form.addRow(intro)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        header = self.table.horizontalHeader()
        for column in (0, 1):  # the address and the model name share the width; the key's column fits "set"
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        self.table.setMinimumHeight(self.table.verticalHeader().defaultSectionSize() * 4)
        self.table.setAccessibleName("Remote workers")
        self.form.addRow(self.table)
        self.fields["remote_workers"], self.labels["remote_workers"] = self.table, "Remote workers"

        self.url = QLineEdit()
        self.url.setPlaceholderText("http://127.0.0.1:8080")
        self.model = QLineEdit()
        self.model.setPlaceholderText("Optional: the server's own model if empty")
        self.key = QLineEdit()
        self.key.setPlaceholderText("Optional")
        self.key.setEchoMode(QLineEdit.EchoMode.Password)
        for text, edit in (("Add&ress:", self.url), ("&Model name:", self.model), ("API &key:", self.key)):
            label = QLabel(text)
            label.setBuddy(edit)
            self.form.addRow(label, edit)
            edit.textChanged.connect(self._sync)
        self.add_button = QPushButton("&Add server")
        self.remove_button = QPushButton("Remove &selected")
        self.check_button = QPushButton("&Check connection")
        self.check_button.setToolTip("Ask the server in the fields above (or the selected one) whether it answers")
        self.add_button.clicked.connect(self.add)
        self.remove_button.clicked.connect(self.remove)
        self.check_button.clicked.connect(self.check)
        self.checker = ServerCheck(self)
        self.checker.finished.connect(self._checked)
        buttons = QHBoxLayout()
        buttons.addWidget(self.add_button)
        buttons.addWidget(self.remove_button)
        buttons.addWidget(self.check_button)
        buttons.addStretch(1)
        self.form.addRow(buttons)
        self.error = QLabel()
        self.error.setTextFormat(Qt.TextFormat.PlainText)  # it may quote what was typed
        self.error.setStyleSheet(ERROR_STYLE)
        self.error.setWordWrap(True)
        self.form.addRow(self.error)
        self.table.installEventFilter(self)  # Delete removes the selected server
        self.table.itemSelectionChanged.connect(self._sync)
        self._fill()

    def add(self) -> bool:
        """Check the three fields as a remote worker; add it (and clear them) or say why not."""
        try:
            worker = RemoteWorker(url=self.url.text(), model=self.model.text(), api_key=self.key.text())
        except ValidationError as exc:
            err = exc.errors()[0]
            field = {"url": "Address", "model": "Model name", "api_key": "API key"}.get(str(err["loc"][0]), "")
            return self._say(f"{field}: {str(err['msg']).removeprefix('Value error, ')}.", self.url if field != "Model name" else self.model)
        if any((w.url, w.model) == (worker.url, worker.model) for w in self.workers):
            return self._say(f"{worker.url} is already in the list.", self.url)
        self.workers.append(worker)
        for edit in (self.url, self.model, self.key):
            edit.clear()
        self._fill()
        self.table.selectRow(len(self.workers) - 1)
        self.changed.emit()
        return True

    def check(self) -> None:
        """Ask the typed server (else the selected one) whether it answers; the result shows below."""
        rows = self.table.selectionModel().selectedRows()
        if self.url.text().strip():
            try:
                worker = RemoteWorker(url=self.url.text(), model=self.model.text(), api_key=self.key.text())
            except ValidationError as exc:
                self._say(f"Address: {str(exc.errors()[0]['msg']).removeprefix('Value error, ')}.", self.url)
                return
        elif rows:
            worker = self.workers[rows[0].row()]
        else:
            return
        self.check_button.setEnabled(False)
        self.error.setStyleSheet("")
        self.error.setText(f"Checking {worker.url}…")
        self.checker.start(worker.spec())

    def _checked(self, text: str, ok: bool) -> None:
        self.error.setStyleSheet(OK_STYLE if ok else ERROR_STYLE)
        self.error.setText(text)
        self._sync(keep_message=True)

    def remove(self) -> None:
        rows = self.table.selectionModel().selectedRows()
        if not rows:
            return
        row = rows[0].row()
        del self.workers[row]
        self._fill()
        if self.workers:
            self.table.selectRow(min(row, len(self.workers) - 1))
        self.changed.emit()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if (watched is self.table and event.type() == QEvent.Type.KeyPress and isinstance(event, QKeyEvent)
                and event.key() in (Qt.Key.Key_Delete, Qt.Key.Key_Backspace)):
            self.remove()
            return True
        return super().eventFilter(watched, event)

    def values(self) -> dict[str, object]:
        return {"remote_workers": [w.model_dump() for w in self.workers]}

    def _fill(self) -> None:
        self.table.setRowCount(len(self.workers))
        for row, w in enumerate(self.workers):
            for column, text in enumerate((w.url, w.model or "server's default", "set" if w.api_key else "—")):
                item = QTableWidgetItem(text)
                if column == 1 and not w.model:
                    item.setForeground(self.palette().placeholderText())
                self.table.setItem(row, column, item)
        self._sync()

    def _say(self, message: str, focus: QLineEdit) -> bool:
        self.error.setStyleSheet(ERROR_STYLE)
        self.error.setText(message)
        focus.setFocus()
        focus.selectAll()
        return False

    def _sync(self, *_: object, keep_message: bool = False) -> None:
        if not keep_message:
            self.error.clear()
        typed, selected = bool(self.url.text().strip()), bool(self.table.selectionModel().selectedRows())
        self.add_button.setEnabled(typed)
        self.remove_button.setEnabled(selected)
        self.check_button.setEnabled((typed or selected) and not self.error.text().startswith("Checking"))
