"""The settings page of the local API server: on/off, address, port and key, and the server's
live state (listening, port in use, error) as the composition reports it."""

from __future__ import annotations

import secrets
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QComboBox, QHBoxLayout, QLabel, QLineEdit, QPushButton, QSizePolicy, QWidget

from desktop.settings import Settings
from desktop.ui.settings_form import Page, field_width, int_spin

HOSTS = ("127.0.0.1", "0.0.0.0")
STATE_COLORS = {"listening": "#2e7d32", "port_in_use": "#d32f2f", "error": "#d32f2f"}


class ApiPage(Page):
    """The local OpenAI-compatible API server. `status` (desktop.api.server.ApiStatus, read by
    attribute) is the server's state when the dialog opens; show_status() follows it live."""

    def __init__(self, s: Settings, status: Any = None) -> None:
        super().__init__("Local API server")
        self._status = status
        self.enabled = QCheckBox("&Enable the local API server")
        self.enabled.setChecked(s.api_server_enabled)
        self.add("", "api_server_enabled", self.enabled, "Lets other programs use the model through an "
                 "OpenAI-compatible HTTP API (/v1/chat/completions, /v1/models) and Prometheus /metrics.")
        self.host = QComboBox()
        self.host.setEditable(True)
        self.host.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.host.addItems(list(HOSTS) + ([s.api_host] if s.api_host not in HOSTS else []))
        self.host.setCurrentText(s.api_host)
        self.host.setMinimumWidth(field_width(self.host))
        self.add("&Listen on:", "api_host", self.host, "127.0.0.1: programs on this computer only. 0.0.0.0 "
                 "(or one of this computer's addresses): other computers too, which needs an API key.")
        self.port = int_spin("api_port")
        self.port.setValue(s.api_port)
        self.add("&Port:", "api_port", self.port)
        self.key = QLineEdit(s.api_key or "")
        self.key.setEchoMode(QLineEdit.EchoMode.Password)
        self.key.setPlaceholderText("none")
        self.key.setClearButtonEnabled(True)
        self.key.textChanged.connect(self._sync)
        self.generate = QPushButton("&Generate")
        self.generate.setToolTip("Make a new random key")
        self.generate.clicked.connect(self._new_key)
        self.reveal = QPushButton("Sho&w")
        self.reveal.setCheckable(True)
        self.reveal.toggled.connect(self._reveal)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.key, 1)
        row.addWidget(self.generate)
        row.addWidget(self.reveal)
        box = QWidget()
        box.setLayout(row)
        box.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)  # room for a long key
        self.add("API &key:", "api_key", box, "Clients send it as “Authorization: Bearer <key>”. "
                 "Empty: no key (allowed on 127.0.0.1 only).", buddy=self.key)
        self.fields["api_key"] = self.key  # a refused key puts the cursor in the line edit
        self._watch(self.key)
        self.address = QLabel()
        self.address.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.form.addRow("Address:", self.address)
        self.state = QLabel()
        self.state.setObjectName("apiState")
        self.state.setWordWrap(True)
        self.state.setTextFormat(Qt.TextFormat.PlainText)
        self.state.setAccessibleName("API server state")
        self.form.addRow("State:", self.state)
        self.enabled.toggled.connect(self._sync)
        self.port.valueChanged.connect(self._sync)
        self.host.editTextChanged.connect(self._sync)
        self._sync()

    def show_status(self, status: Any) -> None:
        self._status = status
        self._sync()

    def _sync(self, *_: object) -> None:
        on = self.enabled.isChecked()
        for widget in (self.host, self.port, self.key, self.generate, self.address):
            widget.setEnabled(on)
        self.reveal.setEnabled(on and bool(self.key.text()))  # nothing to show without a key
        host = self.host.currentText().strip() or HOSTS[0]
        shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        shown = f"[{shown}]" if ":" in shown else shown
        self.address.setText(f"http://{shown}:{self.port.value()}")  # OpenAI clients: base URL + /v1
        state = getattr(getattr(self._status, "state", None), "value", "off")
        text = self._status.describe() if self._status is not None else "Off"
        if on and state == "off":
            text += " · starts when you press Apply or OK"
        elif not on and state == "listening":
            text += " · stops when you press Apply or OK"
        self.state.setText(text)
        self.state.setStyleSheet(f"color: {STATE_COLORS[state]}; font-weight: 600;" if state in STATE_COLORS else "")

    def _new_key(self) -> None:
        self.key.setText(secrets.token_urlsafe(24))
        self.reveal.setChecked(True)

    def _reveal(self, shown: bool) -> None:
        self.key.setEchoMode(QLineEdit.EchoMode.Normal if shown else QLineEdit.EchoMode.Password)
        self.reveal.setText("Hid&e" if shown else "Sho&w")

    def values(self) -> dict[str, object]:
        return {"api_server_enabled": self.enabled.isChecked(), "api_port": self.port.value(),
                "api_host": self.host.currentText().strip(), "api_key": self.key.text().strip() or None}
