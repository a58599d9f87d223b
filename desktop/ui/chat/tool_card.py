"""A tool call in the chat, as a card: the tool, its arguments, what happened (waiting for you,
running, the result or the error, denied) and how long it took. While the call waits for
approval the card asks: Allow once, Always allow this tool, Deny (`decided` carries the choice)."""

from __future__ import annotations

import json
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from desktop.ui.style import muted, small_font

STATES = {"asking": "Waiting for your approval", "running": "Running…", "done": "Done",
          "failed": "Failed", "denied": "Denied"}
SHOWN_CHARS = 600  # of the arguments and the result; the tooltip has all of the result


def arguments_text(arguments: str) -> str:
    try:
        args = json.loads(arguments or "{}")
    except ValueError:
        return arguments
    return ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items()) if isinstance(args, dict) else arguments


class ToolCard(QFrame):
    decided = Signal(str)  # "once" | "always" | "deny"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("toolCard")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 6, 10, 6)
        layout.setSpacing(3)
        self.title = QLabel()
        font = small_font(self.title, 0)
        font.setBold(True)
        self.title.setFont(font)
        self.title.setTextFormat(Qt.TextFormat.PlainText)
        self.title.setWordWrap(True)
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.state = QLabel()
        self.state.setFont(small_font(self))
        self.state.setStyleSheet(f"color: {muted(self).name()};")
        self.result = QLabel()
        self.result.setTextFormat(Qt.TextFormat.PlainText)
        self.result.setWordWrap(True)
        self.result.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.result.setStyleSheet("font-family: monospace;")
        for widget in (self.title, self.state, self.result):
            layout.addWidget(widget)
        self.buttons = QWidget()
        row = QHBoxLayout(self.buttons)
        row.setContentsMargins(0, 2, 0, 0)
        self.once = QPushButton("Allow &once")
        self.always = QPushButton("Al&ways allow this tool")
        self.deny = QPushButton("&Deny")
        for button, choice in ((self.once, "once"), (self.always, "always"), (self.deny, "deny")):
            button.clicked.connect(lambda _=False, c=choice: self._decide(c))
            row.addWidget(button)
        row.addStretch(1)
        layout.addWidget(self.buttons)
        self.buttons.hide()

    def show_call(self, name: str, arguments: str, state: str, result: str = "", seconds: float = 0.0) -> None:
        args = arguments_text(arguments)
        self.title.setText(f"{name}({args[:SHOWN_CHARS]}{'…' if len(args) > SHOWN_CHARS else ''})")
        took = f" · {seconds:.2f} s" if seconds and state in ("done", "failed") else ""
        self.state.setText(STATES.get(state, state) + took)
        self.result.setText(result[:SHOWN_CHARS] + ("…" if len(result) > SHOWN_CHARS else ""))
        self.result.setToolTip(result[:4000] if len(result) > SHOWN_CHARS else "")
        self.result.setVisible(bool(result))
        if state == "failed":
            self.result.setStyleSheet("font-family: monospace; color: #d32f2f;")
        self.buttons.setVisible(state == "asking")  # never focused by itself: Enter in the text box must not allow a call
        self.setAccessibleName(f"Tool call {name}: {STATES.get(state, state)}")

    def plain(self) -> str:
        """The card as text (Copy): the call, what happened, the result."""
        return "\n".join(t for t in (self.title.text(), self.state.text(), self.result.toolTip() or self.result.text()) if t)

    def show_saved(self, call: dict[str, Any] | None, result: str) -> None:
        call = call or {}
        state = "denied" if call.get("decision") == "deny" else ("done" if call.get("ok") else "failed")
        self.show_call(str(call.get("name", "tool")), str(call.get("arguments", "{}")), state, result,
                       float(call.get("seconds", 0.0) or 0.0))

    def _decide(self, choice: str) -> None:
        self.buttons.hide()
        self.decided.emit(choice)
