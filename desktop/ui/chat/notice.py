"""Lines the chat shows about a turn rather than messages: the "waiting for the model" banner
with Cancel, and the inline notice of a failed or stopped turn with Retry."""

from __future__ import annotations

import re

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from desktop.chat.conversations import Conversation
from desktop.ui.style import accent, muted, small_font, wash

FRIENDLY = {
    "worker_crashed": "The model stopped unexpectedly while answering.",
    "worker_removed": "The remote worker answering this was removed in Settings.",
    "queue_full": "Too many requests are waiting for the model right now.",
    "busy": "The model is busy with other conversations right now.",
    "context_length_exceeded": "This conversation has grown too long for the model. Start a new "
                               "conversation, or edit an earlier message to branch off.",
    "shutdown": "The assistant was shutting down.",
    "model_load": "No model is loaded, so nothing can answer. Choose a working model in Settings → Model.",
    "internal": "Something went wrong in Omnidesk while answering.",
}


def friendly(code: str, message: str, retryable: bool) -> tuple[str, str]:
    """A sentence for the user, and the technical message as a detail when it adds something."""
    head = FRIENDLY.get(code, "The assistant could not answer.")
    head += " Your message is saved — try again." if retryable else " Your message is saved."
    detail = message if message and code not in ("queue_full", "busy", "shutdown") else ""
    numbers = over(message) if code == "context_length_exceeded" else None
    if numbers is not None:  # the numbers alone: the worker's advice to shorten "the message" misleads here
        detail = f"The conversation is {numbers[0]:,} tokens long; the model's window is {numbers[1]:,} tokens."
    return head, detail


UNANSWERED = "Your last message has no reply yet."
# the worker's refusal of a prompt longer than its context (workers/admission.py)
_OVER = re.compile(r"is ([\d,]+) tokens long; the model's context window is ([\d,]+) tokens")
# the gateway's refusal of one message longer than the context can hold at any count (model/messages.py)
_CHARS = re.compile(r"Message \d+ is ([\d,]+) characters long; the limit is ([\d,]+ characters)")


def over(detail: str) -> tuple[int, int] | None:
    """From the worker's refusal of a prompt longer than its window: (the prompt's tokens, the window's)."""
    m = _OVER.search(detail)
    return None if m is None else (int(m.group(1).replace(",", "")), int(m.group(2).replace(",", "")))


def too_long(detail: str, message_chars: int, request_chars: int, alone: bool) -> str | None:
    """When a request was refused as longer than the model's context: the sentence saying that the
    user's last message (`message_chars` of the request's `request_chars`) is by itself too long,
    or None when it is not (the conversation as a whole has grown too long). The message's tokens
    are estimated from its share of the request's characters. `alone`: it is the conversation's
    only message; with no token counts in `detail` that alone tells."""
    m = over(detail)
    if m is None:
        chars = _CHARS.search(detail)
        if chars is not None and int(chars.group(1).replace(",", "")) == message_chars:  # it is this one
            return f"This message is too long for the model ({message_chars:,} characters; the limit is {chars.group(2)})."
        return "This message is too long for the model." if alone else None
    total, limit = m
    if detail.startswith("The last message is too long") and not alone:  # refused although the oldest messages were forgotten
        return f"This message is too long for the model: even alone it takes {total:,} tokens; the limit is {limit:,}."
    tokens = round(total * message_chars / max(request_chars, 1))
    if tokens <= limit and not alone:
        return None
    # the count the detail gives (the whole request's), not the estimate: the two never disagree
    return f"This message is too long for the model: with it the conversation is {total:,} tokens; the limit is {limit:,}."


_MESSAGE_N = re.compile(r"\bMessage (\d+)\b")
_LONG_NUMBER = re.compile(r"(?<![\w.,/-])\d{4,}(?![\w.,/-])")  # not in a name, a path or a number


def ordinal(n: int) -> str:
    """1 → "1st", 2 → "2nd", 11 → "11th", 23 → "23rd"."""
    end = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{end}"


def in_user_terms(detail: str, conv: Conversation) -> str:
    """An error from the gateway or a worker as the chat shows it: "Message 2" (counted in the
    request, where the system prompt is message 1) becomes the message the user knows ("Your
    message", "Your 3rd message", "The assistant's 2nd reply", "The system prompt"), and long
    numbers get thousands separators ("8790 tokens" → "8,790 tokens")."""
    first = 1 + bool(conv.system_prompt)  # the request's number of the conversation's first message

    def name(m: re.Match) -> str:
        n = int(m.group(1))
        if n == 1 and conv.system_prompt:
            return "The system prompt"
        i = n - first
        if not 0 <= i < len(conv.messages):
            return m.group(0)
        role = conv.messages[i].role
        same = [k for k, msg in enumerate(conv.messages) if msg.role == role]
        nth = same.index(i) + 1
        if role == "user":
            return "Your message" if nth == len(same) else f"Your {ordinal(nth)} message"
        return f"The assistant's {ordinal(nth)} reply"

    detail = _MESSAGE_N.sub(name, detail)
    return _LONG_NUMBER.sub(lambda m: f"{int(m.group(0)):,}", detail)


def eta_text(eta_s: float) -> str:
    if eta_s < 1.5:
        return "about 1 s"
    if eta_s < 90:
        return f"about {eta_s:.0f} s"
    return f"about {eta_s / 60:.0f} min"


class QueueBanner(QFrame):
    """"Waiting for the model — position 2, about 3 s" with Cancel; hidden when not queued."""

    cancel_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("queueBanner")
        bg = accent(self, 0.10)
        self.setStyleSheet(f"QFrame#queueBanner {{ background: {bg.name()}; border-radius: 8px; }}")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(12, 6, 8, 6)
        self.label = QLabel()
        layout.addWidget(self.label, 1)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Leave the queue; your message stays in the conversation")
        self.cancel_button.clicked.connect(self.cancel_requested)
        layout.addWidget(self.cancel_button)
        self.hide()

    def show_loading(self) -> None:
        self.label.setText("Waiting for the model to finish loading — your message is sent as soon as it is ready")
        self.show()

    def show_position(self, position: int, eta_s: float) -> None:
        self.label.setText(f"Waiting for the model — position {position}, {eta_text(eta_s)}")
        self.show()


class TurnNotice(QFrame):
    """A failed or stopped turn, in the conversation: what happened, and Retry when it may help."""

    retry_requested = Signal()

    def __init__(self, text: str, detail: str = "", *, error: bool, retry: bool, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("turnNotice")
        edge = QColor("#d9534f") if error else muted(self)
        self.setStyleSheet(f"QFrame#turnNotice {{ background: {wash(edge, 0.10).name()}; "
                           f"border-left: 3px solid {edge.name()}; border-radius: 4px; }}")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(12, 8, 8, 8)
        texts = QVBoxLayout()
        texts.setSpacing(2)
        self.label = QLabel(text)
        self.detail = QLabel(detail)
        self.detail.setFont(small_font(self))
        self.detail.setStyleSheet(f"color: {muted(self).name()};")
        self.detail.setVisible(bool(detail))
        for label in (self.label, self.detail):
            label.setWordWrap(True)
            label.setTextFormat(Qt.TextFormat.PlainText)
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            texts.addWidget(label)
        layout.addLayout(texts, 1)
        self.retry_button = QPushButton("Retry")
        self.retry_button.setToolTip("Send the conversation to the model again")
        self.retry_button.clicked.connect(self.retry_requested)
        self.retry_button.setVisible(retry)
        layout.addWidget(self.retry_button, 0, Qt.AlignmentFlag.AlignTop)
