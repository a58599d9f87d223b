"""The user's utterance in a call, from the VAD's speech start to its final transcript: the
audio from just before the start (the VAD fires a little late) and every frame after it go to
the speech recogniser; its partials are reported as they come, its final text goes to the turn
logic (on the recogniser's thread)."""

from __future__ import annotations

import threading
from collections import deque
from typing import Callable, Protocol

import numpy as np

from desktop.call.draft import Draft
from desktop.call.events import CallEvent
from desktop.call.turn_taking import TurnTaking
from desktop.media.clock import Clock

PRE_ROLL_S = 0.4  # audio kept from before the VAD's speech start (it fires a little late)


class Transcriber(Protocol):
    """Speech recognition of one utterance at a time: `begin` with the audio before the speech
    start, `feed` frames (partials go to `on_partial`), `finish` calls `on_text(text, asr_ms)` on
    another thread when the final text is ready; `cancel` drops the utterance. A `close()`, where
    it has one, is called when the call ends (its threads stop). A `words_so_far()`, where it has
    one, is the text of every voiced sample fed so far (blocking until its pass is done): the
    smart end of turn reads it at a pause."""

    def begin(self, pre_roll: np.ndarray, on_partial: Callable[[str], None]) -> None: ...

    def feed(self, samples: np.ndarray, voiced: bool) -> None: ...

    def finish(self, on_text: Callable[[str, float], None]) -> None: ...

    def cancel(self) -> None: ...


class Utterance:
    """`remember` every clean frame (the pre-roll), `feed` the frames while `collecting`;
    `begin`/`finish`/`cancel` carry out the turn logic's actions. `last`: (text, asr_ms, clock
    time the speech ended) of the latest final transcript, for the reply's metrics."""

    def __init__(self, transcriber: Transcriber, turn_taking: TurnTaking, clock: Clock,
                 emit: Callable[[CallEvent], None], sample_rate: int = 16000, draft: Draft | None = None) -> None:  # fmt: skip
        self.transcriber, self.turn_taking, self.clock, self.emit = transcriber, turn_taking, clock, emit
        self.draft = draft  # the partials, prefilled into the session while the user speaks
        self.keep = int(PRE_ROLL_S * sample_rate)  # samples of pre-roll
        self.collecting = False
        self.end_t: float | None = None  # when the user's speech ended (the VAD's or the key's time)
        self.last: tuple[str, float, float] | None = None
        self._recent: deque[np.ndarray] = deque()
        self._recent_n = 0
        self._lock = threading.Lock()

    def remember(self, clean: np.ndarray) -> None:
        self._recent.append(clean)
        self._recent_n += clean.size
        while self._recent and self._recent_n - self._recent[0].size >= self.keep:
            self._recent_n -= self._recent.popleft().size

    def feed(self, clean: np.ndarray, voiced: bool) -> None:
        self.transcriber.feed(clean, voiced)

    def begin(self) -> None:
        self.collecting = True
        pre = np.concatenate(list(self._recent)) if self._recent else np.zeros(0, np.float32)
        if self.draft is not None:
            self.draft.begin()
        self.transcriber.begin(pre, self._partial)

    def _partial(self, text: str) -> None:
        self.emit(CallEvent("partial", text))
        if self.draft is not None:
            self.draft.partial(text)

    def finish(self) -> None:
        self.collecting = False
        end_t = self.end_t if self.end_t is not None else self.clock.now()
        self.transcriber.finish(lambda text, ms, end_t=end_t: self._transcribed(text, ms, end_t))

    def cancel(self) -> None:
        self.collecting = False
        self.transcriber.cancel()
        if self.draft is not None:
            self.draft.withdraw()

    def _transcribed(self, text: str, asr_ms: float, end_t: float) -> None:
        """The final transcript of an utterance (on the transcriber's thread)."""
        with self._lock:
            self.last = (text, asr_ms, end_t)
        if text.strip():
            self.emit(CallEvent("user", text.strip()))
        elif self.draft is not None:  # no words after all: no turn, and no draft of one
            self.draft.withdraw()
        state = self.turn_taking.state
        self.turn_taking.do(lambda now: state.transcript(text, now))
