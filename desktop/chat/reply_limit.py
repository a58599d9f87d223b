"""Why a reply was cut short, in words (no Qt): at the reply length limit (the request's max_tokens),
which Continue goes past, or where the model's context window filled up: the next message then
makes the model forget the oldest ones (workers/slide.py), unless the user chose to stop there."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from desktop.protocol import FinishReason

WINDOW_ADVICE = "Start a new conversation, or edit an earlier message to branch off from there."


class Cut(str, Enum):
    REPLY = "reply"  # the reply length limit: Continue writes more of the same reply
    WINDOW = "window"  # the model's context window is full: nothing more fits after it


@dataclass(frozen=True, slots=True)
class Limit:
    """A reply cut by `cut` at `tokens` (the reply limit, or the size of the model's window)."""

    cut: Cut
    tokens: int

    @property
    def can_continue(self) -> bool:
        return self.cut is Cut.REPLY

    @property
    def sentence(self) -> str:
        if self.cut is Cut.REPLY:
            return f"Stopped at the reply length limit ({self.tokens:,} tokens)."
        return (f"The conversation has filled the model's window ({self.tokens:,} tokens). The next message makes the "
                "model forget the oldest ones, unless Settings → Sampling says to stop.")

    @property
    def hint(self) -> str:
        """Where the limit is set, or why there is no going on."""
        if self.cut is Cut.REPLY:
            return "Continue writes more of this reply. The limit is “Longest reply” in Settings → Sampling."
        return ("The model cannot read more than its window. With “Forget the oldest messages” (the default) it goes on "
                f"without them; with “Stop and tell me”: {WINDOW_ADVICE[0].lower()}{WINDOW_ADVICE[1:]}")

    @property
    def badge(self) -> str:
        """A few words for the reply's stats line."""
        return "cut at the reply length limit" if self.cut is Cut.REPLY else "cut: the model's window is full"


def limit_of(stats: dict[str, Any] | None) -> Limit | None:
    """The limit that cut a reply, from its saved stats; None when it ended on its own or was stopped."""
    stats = stats or {}
    reason = stats.get("finish_reason")
    try:
        generated, prompt = int(stats.get("generated_tokens") or 0), int(stats.get("input_tokens") or 0)
    except (TypeError, ValueError):  # a damaged file's stats: say nothing rather than something wrong
        return None
    if reason == FinishReason.LENGTH.value:
        return Limit(Cut.REPLY, generated)
    if reason == FinishReason.WINDOW.value:
        return Limit(Cut.WINDOW, prompt + generated)
    return None


def which_length(stats: dict[str, Any], max_tokens: int) -> dict[str, Any]:
    """A reply's stats with a plain "length" told apart: a remote server says "length" for both
    limits, and a reply shorter than its own limit was cut by the window."""
    generated = stats.get("generated_tokens")
    if stats.get("finish_reason") == FinishReason.LENGTH.value and isinstance(generated, int) and generated < max_tokens:
        return {**stats, "finish_reason": FinishReason.WINDOW.value}
    return stats
