"""The viewer's transcript: every turn with its time and latency, a cut reply shown as heard and
struck-through, the current turn highlighted and kept in view; a turn's time is a link that seeks."""

from __future__ import annotations

import html

from PySide6.QtCore import QUrl, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QTextBrowser, QWidget

from desktop.recording.reader import Turn
from desktop.ui.call.transcript import split_heard
from desktop.ui.chat.style import blend, muted
from desktop.ui.recordings.format import clock_text


def latency_text(turn: Turn) -> str:
    m = turn.metrics
    parts = []
    if isinstance(m.get("eos_to_audio_ms"), (int, float)):
        parts.append(f"{m['eos_to_audio_ms']:,.0f} ms to first sound")
    if isinstance(m.get("ttft_ms"), (int, float)):
        parts.append(f"TTFT {m['ttft_ms']:,.0f} ms")
    if isinstance(m.get("cached_tokens"), int) and isinstance(m.get("new_tokens"), int):
        parts.append(f"{m['cached_tokens']:,} cached / {m['new_tokens']:,} new tokens")
    return " · ".join(parts)


class TranscriptView(QTextBrowser):
    """`set_turns(turns)`, `set_current(index)`; emits `seek(t)` when a turn's time is clicked."""

    seek = Signal(float)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setOpenLinks(False)
        self.anchorClicked.connect(self._clicked)
        self.turns: list[Turn] = []
        self.current: int | None = None
        self.setPlaceholderText("Nothing was said in this recording.")

    def set_turns(self, turns: list[Turn]) -> None:
        self.turns, self.current = turns, None
        self._render()

    def set_current(self, index: int | None) -> None:
        if index != self.current:
            self.current = index
            bar = self.verticalScrollBar().value()
            self._render()
            self.verticalScrollBar().setValue(bar)
            if index is not None:
                self.scrollToAnchor(f"turn{index}")

    def _clicked(self, url: QUrl) -> None:
        if url.scheme() == "seek":
            self.seek.emit(float(url.path() or url.host() or 0))

    def _render(self) -> None:
        if not self.turns:
            self.clear()
            return
        pal = self.palette()
        hl = blend(pal.color(QPalette.ColorRole.Base), pal.color(QPalette.ColorRole.Highlight), 0.18).name()
        quiet = muted(self).name()
        rows = []
        for i, turn in enumerate(self.turns):
            style = f" style='background:{hl}'" if i == self.current else ""
            head = (f"<a name='turn{i}'></a><a href='seek:{turn.start:.3f}' style='color:{quiet};"
                    f"text-decoration:none'>Turn {turn.turn} · {clock_text(turn.start)}</a>")
            latency = latency_text(turn)
            if latency:
                head += f" <span style='color:{quiet}'>· {html.escape(latency)}</span>"
            body = [head]
            if turn.user_text:
                body.append(f"<b>You</b> {html.escape(turn.user_text)}")
            if turn.images:  # what the user attached, small
                body.append(" ".join(f"<img src='{html.escape(QUrl.fromLocalFile(str(p)).toString())}' height='64'>"
                                     for p in turn.images))
            if turn.assistant_text:
                if turn.heard is not None:
                    kept, cut = split_heard(turn.assistant_text, turn.heard)
                    reply = (f"{html.escape(kept)} <s style='color:{quiet}'>{html.escape(cut)}</s>"
                             f" <span style='color:#d9534f'>— interrupted"
                             f"{' at ' + clock_text(turn.barge_in_t) if turn.barge_in_t is not None else ''}</span>")
                else:
                    reply = html.escape(turn.assistant_text)
                body.append(f"<b>Assistant</b> {reply}")
            rows.append(f"<tr><td{style}>{'<br>'.join(body)}</td></tr>")
        self.setHtml("<table width='100%' cellspacing='0' cellpadding='8'>" + "".join(rows) + "</table>")
