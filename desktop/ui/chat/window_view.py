"""How much of the model's window a conversation fills, and where the model's view of it starts
after a slide (workers/slide.py): a small meter ("3,210 / 8,192 tokens") under the messages and a
thin divider above the first message the model still sees. Nothing is deleted from the
conversation: the messages above the divider are only beyond what the model can read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QWidget

from desktop.ui.style import muted

MARK_TEXT = "Earlier messages are beyond what the model can see"


@dataclass(frozen=True, slots=True)
class WindowUse:
    """The last reply's prompt + reply tokens, and the first message (an index in the
    conversation's messages) the model still saw then: 0 when it saw them all."""

    tokens: int
    first_seen: int


def window_use(messages: Sequence[Any]) -> WindowUse | None:
    """From the saved stats of the conversation's last reply that has them; None before any."""
    for m in reversed(messages):
        stats = getattr(m, "stats", None) or {}
        try:
            tokens = int(stats.get("input_tokens") or 0) + int(stats.get("generated_tokens") or 0)
            first = int(stats.get("first_seen") or 0)
        except (TypeError, ValueError):  # a damaged file's stats: say nothing rather than something wrong
            return None
        if tokens:
            return WindowUse(tokens, max(first, 0))
    return None


class WindowMeter(QLabel):
    """"3,210 / 8,192 tokens": the conversation's size in the model's window (hidden before the
    first reply, or while the window's size is not known)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.setStyleSheet(f"color: {muted(self).name()}; font-size: 11px;")
        self.hide()

    def show_use(self, use: WindowUse | None, window: int) -> None:
        if use is None or window <= 0:
            self.hide()
            return
        self.setText(f"{min(use.tokens, window):,} / {window:,} tokens")
        tip = "How much of the model's window (what it can read at once) this conversation fills."
        if use.first_seen:
            tip += " The oldest messages no longer fit: the model sees from the marked message on."
        self.setToolTip(tip)
        self.show()


class WindowMark(QWidget):
    """A thin divider with a few words, above the first message the model still sees."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 4, 0, 4)
        color = muted(self).name()
        label = QLabel(MARK_TEXT)
        label.setStyleSheet(f"color: {color}; font-size: 11px;")
        row.addWidget(_line(color), 1)
        row.addWidget(label)
        row.addWidget(_line(color), 1)
        self.setToolTip("Nothing was deleted: the model's window is full, so it reads the conversation from here on.")
        self.label = label


def _line(color: str) -> QFrame:
    line = QFrame()
    line.setFrameShape(QFrame.Shape.HLine)
    line.setStyleSheet(f"color: {color};")
    return line
