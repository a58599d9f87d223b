"""What a call reports: `CallEvent`s to its listeners (the page, the recorder, the factory) and
one `TurnMetrics` per exchange; `CallEvents` hands each event to every listener."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

from desktop.call.state import CallPhase, TurnEnd

log = logging.getLogger(__name__)


@dataclass(slots=True)
class TurnMetrics:
    """One exchange of the call, as the metrics panel and bench/call.py report it."""

    turn: int
    user_text: str = ""
    speech_end_t: float | None = None  # clock time of the user's last voiced sample
    asr_ms: float | None = None  # the wait for the final transcript once the VAD ended the turn
    ttft_ms: float | None = None  # the reply's first token (the worker's figure)
    cached_tokens: int = 0
    new_tokens: int = 0
    draft_tokens: int = 0  # of the cached ones, prefilled while the user spoke (drafts of their words)
    kv_tokens: int = 0  # the session's KV after the reply
    transcript_t: float | None = None  # clock time the final transcript was there
    first_token_t: float | None = None  # clock time the reply's first text arrived
    first_audio_t: float | None = None  # clock time the reply's first sample reached the speaker
    assistant_text: str = ""
    heard: str | None = None  # set when a barge-in cut the reply: what was kept
    underruns: int | None = None  # times the speaker ran dry during the reply (gaps heard)
    drift_ms: float | None = None  # how much longer than its audio the reply took to play: its gaps' silence
    images: int = 0  # camera frames attached to the user's turn
    turn_end: TurnEnd | None = None  # when and how the user's turn was judged over (smart | fallback | silence | ...)

    @property
    def decision_ms(self) -> float | None:
        """The user's last voiced sample → the turn judged over: the end-of-turn wait."""
        if self.speech_end_t is None or self.turn_end is None:
            return None
        return (self.turn_end.t - self.speech_end_t) * 1000.0

    @property
    def first_sound_ms(self) -> float | None:
        """The reply's first text → its first sound: what the voice adds."""
        if self.first_token_t is None or self.first_audio_t is None:
            return None
        return (self.first_audio_t - self.first_token_t) * 1000.0

    @property
    def eos_to_audio_ms(self) -> float | None:
        if self.speech_end_t is None or self.first_audio_t is None:
            return None
        return (self.first_audio_t - self.speech_end_t) * 1000.0


@dataclass(frozen=True, slots=True)
class CallEvent:
    """kind: phase | level | partial | user | assistant | cut | metrics | error | notice (something
    the user should know that did not stop the call) | ended."""

    kind: str
    text: str = ""
    value: float = 0.0
    phase: CallPhase | None = None
    metrics: TurnMetrics | None = None
    reason: str = ""  # cut: why the reply stopped (barge_in | force_listen | paused | ended)


class CallEvents:
    """The call's listeners (`listeners`, a list callers append to and remove from); `emit` gives
    an event to each on the thread that produced it. A listener's bug is logged, never raised."""

    def __init__(self) -> None:
        self.listeners: list[Callable[[CallEvent], None]] = []

    def emit(self, event: CallEvent) -> None:
        for listener in list(self.listeners):
            try:
                listener(event)
            except Exception:
                log.exception("call listener failed on %s", event.kind)
