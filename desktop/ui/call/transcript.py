"""The call's live transcript: the user's words while they speak (greyed partials, replaced by
the final text), the assistant's reply as it streams, and, where the user talked over it, the
heard part kept and the rest struck through with "— interrupted"."""

from __future__ import annotations

import html
from dataclasses import dataclass

from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QLabel, QTextBrowser, QWidget

from desktop.call.state import CallMode
from desktop.ui.style import muted

EMPTY_HINT = ("Start a call and talk: the assistant answers aloud, and stops as soon as you talk over it. "
              "What you both say appears here.")


NO_MIC_HINT = ("Calls need a microphone. Connect one and come back to this page (it looks again each time), "
               "or choose another in Settings → Audio (Ctrl+,).")


def empty_hint(in_call: bool, mode: CallMode, mic_problem: str | None = None) -> str:
    """What the empty transcript says: how to begin (or what is missing to begin)."""
    if not in_call:
        return NO_MIC_HINT if mic_problem else EMPTY_HINT
    if mode is CallMode.PUSH_TO_TALK:
        return "Hold Space (or Hold to talk) while you speak — your words appear here."
    return "Say something — your words appear here as you speak."


@dataclass(slots=True)
class Entry:
    role: str  # "user" | "assistant"
    text: str
    partial: bool = False  # user: the words so far, not final
    heard: str | None = None  # assistant: cut short; what the user heard of it


def split_heard(text: str, heard: str) -> tuple[str, str]:
    """`text` split after as many words as `heard` has: (kept, cut). The voice's text is the
    reply's words re-joined (segments, whitespace), so words are counted, not characters."""
    n = len(heard.split())
    if n == 0:
        return "", text.strip()
    words = 0
    in_word = False
    for i, ch in enumerate(text):
        if ch.isspace():
            if in_word:
                words += 1
                in_word = False
                if words == n:
                    return text[:i].strip(), text[i:].strip()
        else:
            in_word = True
    return text.strip(), ""


class TranscriptLog:
    """The entries, Qt-free: what each CallEvent does to them."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self._partial: Entry | None = None  # the user's utterance being spoken
        self._reply: Entry | None = None  # the assistant's reply receiving deltas

    def partial(self, text: str) -> None:
        if self._partial is None:
            self._partial = Entry("user", text, partial=True)
            self.entries.append(self._partial)
        else:
            self._partial.text = text

    def drop_partial(self) -> None:
        """The utterance ended with no words (silence, a pause): its partial goes."""
        if self._partial is not None:
            self.entries.remove(self._partial)
            self._partial = None

    def user(self, text: str) -> None:
        if self._partial is not None:
            self._partial.text, self._partial.partial = text, False
            self._partial = None
        else:
            self.entries.append(Entry("user", text))
        self._reply = None  # the next delta starts the answer to this

    def assistant(self, delta: str) -> None:
        if self._reply is None:
            self._reply = Entry("assistant", "")
            self.entries.append(self._reply)
        self._reply.text += delta

    def cut(self, heard: str) -> None:
        """The reply was cut (barge-in, Listen now, pause, hang-up): keep what was heard."""
        last = next((e for e in reversed(self.entries) if e.role == "assistant"), None)
        if last is not None and last.heard is None:
            last.heard = heard
        self._reply = None

    def clear(self) -> None:
        self.entries.clear()
        self._partial = self._reply = None


def _text(text: str) -> str:
    return html.escape(text).replace("\n", "<br>")


def entry_html(entry: Entry, grey: str) -> str:
    who = "You" if entry.role == "user" else "Assistant"
    color = "#3a7bd5" if entry.role == "user" else "#1a9bb0"
    if entry.partial:
        body = f'<span style="color:{grey}"><i>{_text(entry.text)}…</i></span>'
    elif entry.heard is not None:
        kept, rest = split_heard(entry.text, entry.heard)
        body = _text(kept) + (" " if kept else "")
        body += f'<span style="color:{grey}">'
        body += f"<s>{_text(rest)}</s> " if rest else ""
        body += "— interrupted</span>"
    else:
        body = _text(entry.text)
    return f'<p style="margin:0 0 12px 0"><span style="color:{color}; font-weight:600">{who}</span><br>{body}</p>'


class TranscriptView(QTextBrowser):
    """Shows a TranscriptLog; `refresh()` after changing it. Follows the end while the user has
    not scrolled up. While it is empty it shows its placeholder text wrapped to its width (Qt's
    own placeholder is one line, cut off in a narrow window): `hint`, a label over the viewport."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.log = TranscriptLog()
        self.setOpenLinks(False)
        self.hint = QLabel(self.viewport())
        self.hint.setTextFormat(Qt.TextFormat.PlainText)
        self.hint.setWordWrap(True)
        self.hint.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.hint.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.hint.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self.document().setDocumentMargin(14)
        self.document().contentsChanged.connect(self._place_hint)
        self.setPlaceholderText(EMPTY_HINT)
        self.setAccessibleName("Call transcript")

    def setPlaceholderText(self, text: str) -> None:  # noqa: N802 (Qt's name)
        self.hint.setText(text)
        self.setAccessibleDescription(text)
        self._place_hint()

    def placeholderText(self) -> str:  # noqa: N802
        return self.hint.text()

    def viewportEvent(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Resize:
            self._place_hint()
        return super().viewportEvent(event)

    def _place_hint(self) -> None:
        margin = int(self.document().documentMargin())
        width = max(self.viewport().width() - 2 * margin, 1)
        self.hint.setGeometry(margin, margin, width, self.hint.heightForWidth(width))
        self.hint.setVisible(bool(self.hint.text()) and self.document().isEmpty())

    def refresh(self) -> None:
        bar = self.verticalScrollBar()
        at_end = bar.value() >= bar.maximum() - 4
        keep = bar.value()
        grey = muted(self).name()
        self.setHtml("".join(entry_html(e, grey) for e in self.log.entries))
        bar.setValue(bar.maximum() if at_end else keep)
