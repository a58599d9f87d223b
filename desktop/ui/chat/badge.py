"""The small line under an assistant reply: cached vs new tokens, time to first token, speed,
and why the turn missed the cache; the tooltip has the full numbers."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel

from desktop.chat.export import stats_line
from desktop.protocol.reasons import sentence_of
from desktop.ui.style import muted, small_font

def details(stats: dict[str, Any]) -> str:
    """The turn's cache reason in a sentence, then every number, one per line (the tooltip)."""
    why = sentence_of(stats.get("miss_reason", ""), stats.get("kind", ""))
    rows = [f"Cache: {why}"] if why else []
    rows += [f"Prompt tokens: {stats.get('input_tokens', 0)} ({stats.get('cached_tokens', 0)} from cache)",
             f"Reply tokens: {stats.get('generated_tokens', 0)}",
             f"Prefill: {float(stats.get('prefill_ms', 0)):.0f} ms · first token after {float(stats.get('ttft_ms', 0)):.0f} ms",
             f"Decoding: {float(stats.get('decode_ms', 0)):.0f} ms"]
    history = int(stats.get("history_tokens", 0))
    if history:
        reused = min(int(stats.get("cached_tokens", 0)), history)
        rows.insert(2 if why else 1, f"History before your message: {history} tokens, {reused} from cache")
    if typed := int(stats.get("typed_tokens", 0)):
        at = next(i for i, row in enumerate(rows) if row.startswith("Reply tokens"))
        rows.insert(at, f"Your message: {typed} tokens prefilled while you typed")
    if float(stats.get("queue_ms", 0)) >= 1:
        rows.append(f"Waited in the queue: {float(stats['queue_ms']) / 1000:.1f} s")
    if stats.get("worker"):
        rows.append(f"Answered by: {stats['worker']}")
    return "\n".join(rows)


class Badge(QLabel):
    """Empty (hidden) until `set_stats` gets the stats of a finished reply."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setFont(small_font(self))
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setStyleSheet(f"color: {muted(self).name()};")
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.setWordWrap(True)
        self.hide()

    def set_stats(self, stats: dict[str, Any] | None) -> None:
        line = stats_line(stats)
        self.setText(line)
        self.setToolTip(details(stats) if stats else "")
        self.setVisible(bool(line))
