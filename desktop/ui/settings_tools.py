"""The Tools page of the settings dialog: the MCP servers whose tools the chat may offer the model.
Add servers by pasting a JSON config (the `mcpServers` shape of Claude Desktop or Cursor) or one
by one (a command, or a URL with headers); each shows its state (starting, ready with its tools,
failed: why) and its tools; its check box turns its tools on or off; Delete removes it. States come
from the running servers (desktop/tools/manager.py), whose changes arrive on another thread."""

from __future__ import annotations

import shlex
from typing import Any

from PySide6.QtCore import QEvent, QObject, Qt, QTimer, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QAbstractItemView, QHBoxLayout, QLabel, QLineEdit, QPlainTextEdit, QPushButton, QTreeWidget, QTreeWidgetItem,
    QWidget,
)

from desktop.settings import Settings
from desktop.tools.config import ConfigError, ServerConfig, merged, parse_pasted, server
from desktop.tools.results import FAILED, READY, ServerState
from desktop.ui.settings_form import Page, hint

ERROR_STYLE = "color: #d32f2f;"
EXAMPLE = '{"mcpServers": {"files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home"]}}}'


class StateRelay(QObject):
    """The manager's state changes (any thread), brought to the Qt thread."""

    changed = Signal(str)

    def __call__(self, name: str) -> None:
        try:
            self.changed.emit(name)
        except RuntimeError:  # the page is gone
            pass


class ToolsPage(Page):
    """`servers` holds what the list shows, in order; `tools` is the ToolManager (None: no states)."""

    def __init__(self, s: Settings, tools: Any = None) -> None:
        super().__init__("Tools")
        self.servers: list[ServerConfig] = list(s.mcp_servers)
        self.manager = tools
        self.form.addRow(hint("MCP servers give the assistant tools: files, the web, your apps. The chat offers "
                              "the tools of the servers ticked here when its Tools switch is on, and asks you "
                              "before each call runs. Servers start when you apply."))
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(("Server", "State", "Starts with"))
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.tree.setAccessibleName("MCP servers and their tools")
        self.tree.setMinimumHeight(170)
        self.tree.setColumnWidth(0, 190)
        self.tree.setColumnWidth(1, 200)
        self.tree.itemChanged.connect(self._ticked)
        self.tree.currentItemChanged.connect(lambda *_: self._tell_state())
        self.tree.installEventFilter(self)  # Delete removes the selected server
        self.form.addRow(self.tree)

        self.paste = QPlainTextEdit()
        self.paste.setPlaceholderText(EXAMPLE)
        self.paste.setTabChangesFocus(True)
        self.paste.setFixedHeight(64)
        self.paste.setAccessibleName("Pasted JSON config")
        paste_label = QLabel("&JSON config:")
        paste_label.setBuddy(self.paste)
        self.paste_button = QPushButton("Add from JS&ON")
        self.paste_button.clicked.connect(self.add_pasted)
        self.form.addRow(paste_label, self.paste)
        self.form.addRow("", self.paste_button)

        self.name = QLineEdit()
        self.name.setPlaceholderText("e.g. files")
        self.target = QLineEdit()
        self.target.setPlaceholderText("A command (npx -y server-x) or a URL (https://host/mcp)")
        self.extra = QLineEdit()
        self.extra.setPlaceholderText("Optional: KEY=value; … (environment of a command, headers of a URL)")
        self.extra.setEchoMode(QLineEdit.EchoMode.PasswordEchoOnEdit)  # keys and tokens are not shown
        for text, edit in (("&Name:", self.name), ("Co&mmand or URL:", self.target), ("&Env or headers:", self.extra)):
            label = QLabel(text)
            label.setBuddy(edit)
            self.form.addRow(label, edit)
        self.add_button = QPushButton("&Add server")
        self.remove_button = QPushButton("Remove &selected")
        self.restart_button = QPushButton("Res&tart selected")
        self.restart_button.setToolTip("Start the selected server again (after it failed, or to list its tools anew)")
        self.add_button.clicked.connect(self.add_one)
        self.remove_button.clicked.connect(self.remove)
        self.restart_button.clicked.connect(self.restart)
        buttons = QHBoxLayout()
        buttons.addWidget(self.add_button)
        buttons.addWidget(self.remove_button)
        buttons.addWidget(self.restart_button)
        buttons.addStretch(1)
        self.form.addRow(buttons)
        self.error = QLabel()
        self.error.setTextFormat(Qt.TextFormat.PlainText)
        self.error.setStyleSheet(ERROR_STYLE)
        self.error.setWordWrap(True)
        self.form.addRow(self.error)
        self.fields["mcp_servers"], self.labels["mcp_servers"] = self.tree, "MCP servers"

        self.relay = StateRelay(self)
        self.relay.changed.connect(lambda _name: self._fill())
        if tools is not None:
            tools.listeners.append(self.relay)
            self.destroyed.connect(lambda *_: tools.listeners.remove(self.relay) if self.relay in tools.listeners else None)
        self._fill()

    # ------------------------------------------------------------------ adding and removing

    def add_pasted(self) -> bool:
        try:
            new = parse_pasted(self.paste.toPlainText())
            self.servers = merged(self.servers, new)
        except ConfigError as err:
            return self._say(str(err), self.paste)
        self.paste.clear()
        return self._added(f"Added {', '.join(s.name for s in new)}. Apply to start.")

    def add_one(self) -> bool:
        target, name = self.target.text().strip(), self.name.text().strip()
        try:
            pairs = _pairs(self.extra.text())
            if target.lower().startswith(("http://", "https://")):
                cfg = server({"url": target, "headers": pairs}, name)
            else:
                words = shlex.split(target) if target else []
                cfg = server({"command": words[0] if words else "", "args": words[1:], "env": pairs}, name)
            self.servers = merged(self.servers, [cfg])
        except (ConfigError, ValueError) as err:
            return self._say(str(err), self.target if name else self.name)
        for edit in (self.name, self.target, self.extra):
            edit.clear()
        return self._added(f"Added {cfg.name}. Apply to start it.")

    def remove(self) -> None:
        item = self._selected()
        if item is None:
            return
        name = item.data(0, Qt.ItemDataRole.UserRole)
        self.servers = [s for s in self.servers if s.name != name]
        self._fill()
        self.changed.emit()

    def restart(self) -> None:
        item = self._selected()
        if item is None or self.manager is None:
            return
        name = item.data(0, Qt.ItemDataRole.UserRole)
        if name not in self.manager.states():
            self._say(f"{name} starts when you apply.", self.paste)
            return
        self.manager.restart(name)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if (watched is self.tree and event.type() == QEvent.Type.KeyPress and isinstance(event, QKeyEvent)
                and event.key() in (Qt.Key.Key_Delete, Qt.Key.Key_Backspace)):
            self.remove()
            return True
        return super().eventFilter(watched, event)

    def values(self) -> dict[str, object]:
        return {"mcp_servers": [s.model_dump() for s in self.servers]}

    # ------------------------------------------------------------------ drawing

    def state_of(self, cfg: ServerConfig) -> ServerState:
        if not cfg.enabled:
            return ServerState(cfg.name, "off")
        if self.manager is None or cfg.name not in self.manager.states():
            return ServerState(cfg.name, "new")
        return self.manager.state(cfg.name)

    def _fill(self) -> None:
        selected = self._selected()
        keep = selected.data(0, Qt.ItemDataRole.UserRole) if selected is not None else None
        self.tree.blockSignals(True)
        self.tree.clear()
        for cfg in self.servers:
            state = self.state_of(cfg)
            text = {"new": "Starts when you apply", "off": "Off: its tools are not offered"}.get(state.status, state.summary())
            item = QTreeWidgetItem([cfg.name, text, cfg.describe()])
            item.setData(0, Qt.ItemDataRole.UserRole, cfg.name)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(0, Qt.CheckState.Checked if cfg.enabled else Qt.CheckState.Unchecked)
            item.setToolTip(1, text)
            item.setToolTip(2, cfg.describe())
            if state.status == FAILED:
                item.setForeground(1, Qt.GlobalColor.red)
            for tool in state.tools if state.status == READY else ():
                child = QTreeWidgetItem([tool.name, tool.description.split("\n")[0][:120], ""])
                child.setToolTip(1, tool.description)
                child.setFlags(child.flags() & ~Qt.ItemFlag.ItemIsUserCheckable)
                item.addChild(child)
            self.tree.addTopLevelItem(item)
            item.setExpanded(True)
            if cfg.name == keep:
                self.tree.setCurrentItem(item)
        self.tree.blockSignals(False)
        self.remove_button.setEnabled(bool(self.servers))
        self.restart_button.setEnabled(bool(self.servers) and self.manager is not None)

    def _tell_state(self) -> None:
        """A failed server's whole reason, under the list, when it is selected (the column cuts it)."""
        item = self._selected()
        cfg = next((c for c in self.servers if item is not None and c.name == item.data(0, Qt.ItemDataRole.UserRole)), None)
        if cfg is not None and self.state_of(cfg).status == FAILED:
            self._say(f"{cfg.name}: {self.state_of(cfg).summary()}", self.tree)

    def _ticked(self, item: QTreeWidgetItem, column: int) -> None:
        name = item.data(0, Qt.ItemDataRole.UserRole)
        if column != 0 or name is None:
            return
        on = item.checkState(0) == Qt.CheckState.Checked
        self.servers = [s.model_copy(update={"enabled": on}) if s.name == name else s for s in self.servers]
        self.changed.emit()
        QTimer.singleShot(0, self._fill)  # its state anew, once this signal is over (the item is rebuilt)

    def _selected(self) -> QTreeWidgetItem | None:
        item = self.tree.currentItem()
        while item is not None and item.parent() is not None:
            item = item.parent()
        return item

    def _added(self, text: str) -> bool:
        self.error.setStyleSheet("")
        self.error.setText(text)
        self._fill()
        self.changed.emit()
        return True

    def _say(self, text: str, focus: QWidget) -> bool:
        self.error.setStyleSheet(ERROR_STYLE)
        self.error.setText(text)
        focus.setFocus()
        return False


def _pairs(text: str) -> dict[str, str]:
    """`KEY=value; Other: value` as a dict; ValueError naming a piece that is neither."""
    out: dict[str, str] = {}
    for piece in (p.strip() for p in text.split(";")):
        if not piece:
            continue
        cut = min((i for i in (piece.find("="), piece.find(":")) if i > 0), default=-1)
        if cut < 0:
            raise ValueError(f"“{piece[:40]}” is not KEY=value (or Header: value).")
        out[piece[:cut].strip()] = piece[cut + 1:].strip()
    return out
