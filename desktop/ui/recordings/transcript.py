"""The viewer's transcript: every turn with its time and latency, a reply's Markdown rendered as in
the chat, a cut reply shown as heard and struck-through, the current turn highlighted and kept in
view; a turn's time is a link that seeks. Only a window of turns around the current one is in the
document (bounded in turns and characters), so a 200,000-line recording shows as fast as a short one."""

from __future__ import annotations

import html

from PySide6.QtCore import QUrl, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QTextBrowser, QWidget

from desktop.recording.reader import Turn
from desktop.ui.call.transcript import split_heard
from desktop.ui.style import blend, muted
from desktop.ui.recordings.format import clock_text
from desktop.ui.recordings.markdown_html import markdown_html, plain_html

WINDOW_TURNS = 40  # turns in the document at once
WINDOW_CHARS = 40_000  # … and at most about this much of their text
TURN_CHARS = 20_000  # a longer text shows its start, and says how much more there is


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
        self.first, self.last = 0, 0  # the window of turns in the document: turns[first:last]
        self._bodies: dict[int, str] = {}  # a turn's rendered HTML (its Markdown is parsed once)
        self.setPlaceholderText("Nothing was said in this recording.")

    def set_turns(self, turns: list[Turn]) -> None:
        self.turns, self.current, self._bodies = turns, None, {}
        self._move_to(0)

    def set_current(self, index: int | None) -> None:
        if index != self.current:
            self.current = index
            bar = self.verticalScrollBar().value()
            if index is not None and not self.first <= index < self.last:
                self._move_to(max(0, index - WINDOW_TURNS // 4))
            else:
                self._render()
                self.verticalScrollBar().setValue(bar)
            if index is not None:
                self.scrollToAnchor(f"turn{index}")

    def _clicked(self, url: QUrl) -> None:
        if url.scheme() == "seek":
            self.seek.emit(float(url.path() or url.host() or 0))
        elif url.scheme() == "turns":  # the window's "earlier" / "later" links
            self._move_to(int(url.path() or url.host() or 0))

    def _move_to(self, first: int) -> None:
        """Put turns from `first` in the document: up to WINDOW_TURNS, about WINDOW_CHARS of text."""
        first = self.first = last = min(max(first, 0), max(len(self.turns) - 1, 0))
        chars = 0
        while last < len(self.turns) and last - self.first < WINDOW_TURNS and (chars < WINDOW_CHARS or last == first):
            turn = self.turns[last]
            chars += min(len(turn.user_text), TURN_CHARS) + min(len(turn.assistant_text), TURN_CHARS)
            last += 1
        self.last = last
        if len(self._bodies) > 4 * WINDOW_TURNS:
            self._bodies = {i: b for i, b in self._bodies.items() if self.first <= i < self.last}
        self._render()
        self.verticalScrollBar().setValue(0)

    def _render(self) -> None:
        if not self.turns:
            self.clear()
            return
        pal = self.palette()
        hl = blend(pal.color(QPalette.ColorRole.Base), pal.color(QPalette.ColorRole.Highlight), 0.18).name()
        quiet = muted(self).name()
        rows = []
        if self.first > 0:
            back = max(0, self.first - WINDOW_TURNS // 2)
            rows.append(f"<tr><td><a href='turns:{back}' style='color:{quiet}'>‹ Earlier turns "
                        f"({self.first:,} before these)</a></td></tr>")
        for i in range(self.first, self.last):
            style = f" style='background:{hl}'" if i == self.current else ""
            body = self._bodies.get(i)
            if body is None:
                body = self._bodies[i] = self._body(i, quiet)
            rows.append(f"<tr><td{style}>{body}</td></tr>")
        if self.last < len(self.turns):
            rows.append(f"<tr><td><a href='turns:{self.last}' style='color:{quiet}'>Later turns › "
                        f"({len(self.turns) - self.last:,} after these)</a></td></tr>")
        self.setHtml("<table width='100%' cellspacing='0' cellpadding='8'>" + "".join(rows) + "</table>")

    def _body(self, i: int, quiet: str) -> str:
        """Turn `i` as HTML: its head (time link, latency), what the user said, the reply."""
        turn = self.turns[i]
        head = (f"<a name='turn{i}'></a><a href='seek:{turn.start:.3f}' style='color:{quiet};"
                f"text-decoration:none'>Turn {turn.turn} · {clock_text(turn.start)}</a>")
        latency = latency_text(turn)
        if latency:
            head += f" <span style='color:{quiet}'>· {html.escape(latency)}</span>"
        body = [head]
        if turn.user_text:
            body.append(f"<b>You</b> {plain_html(_shown(turn.user_text))}")
        if turn.images:  # what the user attached, small
            body.append(" ".join(f"<img src='{html.escape(QUrl.fromLocalFile(str(p)).toString())}' height='64'>"
                                 for p in turn.images))
        if turn.assistant_text:
            if turn.heard is not None:  # spoken: plain text, what was heard and what was cut
                kept, cut = split_heard(_shown(turn.assistant_text), turn.heard)
                reply = f"{plain_html(kept)} <s style='color:{quiet}'>{plain_html(cut)}</s> {_stop_note(turn, quiet)}"
                body.append(f"<b>Assistant</b> {reply}")
            else:  # the reply's Markdown as the chat shows it, under its label
                body.append(f"<b>Assistant</b> {markdown_html(_shown(turn.assistant_text))}")
        return "<br>".join(body)


STOPPED = {"ended": "the call ended", "paused": "paused", "force_listen": "stopped to listen"}


def _stop_note(turn: Turn, quiet: str) -> str:
    """Why the rest of a spoken reply was not heard: a barge-in (red, as on the lanes) or not."""
    if turn.barge_in_t is not None or turn.stopped is None:
        at = f" at {clock_text(turn.barge_in_t)}" if turn.barge_in_t is not None else ""
        return f"<span style='color:#d9534f'>— interrupted{at}</span>"
    return f"<span style='color:{quiet}'>— {STOPPED.get(turn.stopped, 'stopped')}</span>"


def _shown(text: str) -> str:
    """A text as shown: at most TURN_CHARS of it, and how much more there is."""
    if len(text) <= TURN_CHARS:
        return text
    return f"{text[:TURN_CHARS]}\n\n… ({len(text) - TURN_CHARS:,} more characters not shown)"
