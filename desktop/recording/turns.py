"""A recording's turns built while its timeline streams past: final texts (the streamed deltas when
the final one never came), barge-in, metrics and images; the text kept is bounded, not the file."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

MAX_TEXT_CHARS = 16 << 20  # transcript text kept in memory; a bigger timeline shows this much
TEXT_KINDS = frozenset(("user_text", "user_partial", "assistant_delta", "assistant_text"))


@dataclass(slots=True)
class Turn:
    """One exchange: what the user said or typed, the reply, a barge-in, the turn's numbers."""

    turn: int
    start: float  # the turn's first event
    user_text: str = ""
    assistant_text: str = ""
    heard: str | None = None  # set when the user talked over the reply: what was heard of it
    barge_in_t: float | None = None
    stopped: str | None = None  # the reply stopped without a barge-in: ended | paused | force_listen
    metrics: dict[str, Any] = field(default_factory=dict)
    images: list[Path] = field(default_factory=list)

    @property
    def latency_ms(self) -> float | None:
        """End of the user's speech → first sound of the reply (calls), else time to first token."""
        for key in ("eos_to_audio_ms", "ttft_ms"):
            value = self.metrics.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) < 1e12:
                return float(value)
        return None


class TurnBuilder:
    """`add(t, kind, data)` for each timeline event in file order, then `turns()`. Deltas are kept
    only until their turn's final text comes; all text together stops at `max_chars` (`cut`)."""

    def __init__(self, resolve: Callable[[Any], Path | None], max_chars: int = MAX_TEXT_CHARS) -> None:
        self.resolve, self.left = resolve, max_chars  # resolve: a file name → a path in the folder, or None
        self.cut = False  # text was left out to stay within max_chars
        self._turns: dict[int, Turn] = {}
        self._deltas: dict[int, list[str]] = {}
        self._partials: dict[int, str] = {}
        self._final: set[int] = set()  # turns whose final reply text came

    def _text(self, value: Any) -> str:
        text = value if isinstance(value, str) else ("" if value is None else str(value))
        if len(text) > self.left:
            text, self.cut = text[: max(self.left, 0)], True
        self.left -= len(text)
        return text

    def add(self, t: float, kind: str, data: dict[str, Any]) -> None:
        number = data.get("turn")
        if not isinstance(number, int) or isinstance(number, bool):
            return
        turn = self._turns.get(number)
        if turn is None:
            turn = self._turns[number] = Turn(number, t)
        if kind == "user_text":
            self.left += len(self._partials.pop(number, ""))
            turn.user_text = self._text(data.get("text"))
        elif kind == "user_partial":
            if not turn.user_text:
                self.left += len(self._partials.get(number, ""))
                self._partials[number] = self._text(data.get("text"))
        elif kind == "assistant_delta":
            if number not in self._final:
                self._deltas.setdefault(number, []).append(self._text(data.get("text")))
        elif kind == "assistant_text":
            self.left += sum(len(d) for d in self._deltas.pop(number, ()))
            self._final.add(number)
            turn.assistant_text = self._text(data.get("text"))
            if isinstance(data.get("heard"), str):
                turn.heard = self._text(data["heard"])
        elif kind in ("barge_in", "reply_stopped"):
            if kind == "barge_in":
                turn.barge_in_t = t
            else:
                turn.stopped = str(data.get("reason") or "ended")[:20]
            if turn.heard is None and isinstance(data.get("heard"), str):
                turn.heard = self._text(data["heard"])
        elif kind == "turn_metrics":
            turn.metrics.update({k: v for k, v in data.items() if k != "turn"})
        elif kind == "image":
            path = self.resolve(data.get("file"))
            if path is not None and path.is_file():
                turn.images.append(path)

    def turns(self) -> list[Turn]:
        """The turns in the order they started."""
        for number, turn in self._turns.items():
            if not turn.user_text and number in self._partials:
                turn.user_text = self._partials[number]
            if not turn.assistant_text and number in self._deltas:
                turn.assistant_text = "".join(self._deltas[number])
        return sorted(self._turns.values(), key=lambda t: (t.start, t.turn))
