"""The smart end of a call turn: keeps the last seconds of the user's clean audio, and when the
turn logic asks (`AskTurnEnd`, a short pause) runs the end-of-turn model on the utterance so far,
off the media thread, then reports its verdict to the turn logic (`CallState.turn_judged`)."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Protocol

import numpy as np

from desktop.call.state import AskTurnEnd
from desktop.call.turn_taking import TurnTaking
from desktop.call.turn_words import asks_question, leaves_open
from desktop.media.smart_turn import TurnVerdict

log = logging.getLogger(__name__)
RATE = 16000
KEEP_S = 8.0  # the model's window: the turn's last 8 s
PRE_ROLL_S = 0.4  # audio from before the VAD's speech start (as the utterance's pre-roll)


class TurnModel(Protocol):
    """An end-of-turn model (desktop.media.smart_turn.SmartTurn): the turn's 16 kHz audio up to
    a pause → whether it is complete, its probability and what the call cost."""

    def predict(self, audio: np.ndarray) -> TurnVerdict: ...


class EndOfTurn:
    """`hear(clean)` every microphone frame (media thread: only a copy into a ring), `begin()` at
    each new utterance, `ask(action)` at each pause; `close()` when the call ends. `inline`: run
    the model on the caller's thread (tests on a virtual clock), else on a thread of its own, one
    prediction at a time. `asked`, `ms`: how often the model ran and what each run cost.
    `words()` (optional): the transcript of the utterance so far (waiting for the pass under
    way); a turn the model calls complete stays open when its words end mid-sentence
    (call/turn_words.py), and one it calls incomplete ends when its words are a finished question.
    `held_open`, `questions`: how often each happened."""

    def __init__(self, model: TurnModel, turn_taking: TurnTaking, *, inline: bool = False,
                 words: Callable[[], str | None] | None = None) -> None:  # fmt: skip
        self.model, self.turn_taking, self.words = model, turn_taking, words
        self.held_open = 0
        self.questions = 0  # turns ended by a finished question the model was unsure of
        self._ring = np.zeros(int(KEEP_S * RATE), np.float32)
        self._pos = 0  # samples heard in all (the ring's write position is _pos % size)
        self._start = 0  # _pos at the utterance's start, less the pre-roll
        self._pool = None if inline else ThreadPoolExecutor(1, thread_name_prefix="end-of-turn")
        self.ms: list[float] = []
        self._lock = threading.Lock()

    def hear(self, clean: np.ndarray) -> None:
        x = np.asarray(clean, np.float32).reshape(-1)[-self._ring.size :]
        at = self._pos % self._ring.size
        first = min(x.size, self._ring.size - at)
        self._ring[at : at + first] = x[:first]
        self._ring[: x.size - first] = x[first:]
        self._pos += x.size

    def begin(self) -> None:
        self._start = max(0, self._pos - int(PRE_ROLL_S * RATE))

    def turn_audio(self) -> np.ndarray:
        """The utterance so far (its last KEEP_S seconds), oldest sample first."""
        n = min(self._pos - self._start, self._ring.size)
        at = self._pos % self._ring.size
        if n <= at:
            return self._ring[at - n : at].copy()
        return np.concatenate([self._ring[at - n :], self._ring[:at]])

    def ask(self, action: AskTurnEnd) -> None:
        audio = self.turn_audio()  # on the media thread, before the next frame lands
        if self._pool is None:
            self._judge(action.pause, audio)
        else:
            self._pool.submit(self._judge, action.pause, audio)

    def _judge(self, pause: int, audio: np.ndarray) -> None:
        try:
            complete, probability, ms = self.model.predict(audio)
        except Exception:  # a broken run: the silence rule decides this pause
            log.exception("The end-of-turn model failed")
            complete, probability, ms = None, 0.0, 0.0
        else:
            with self._lock:
                self.ms.append(ms)
            text = self._words()
            if complete and text is not None and leaves_open(text):
                complete = False  # the words say the sentence goes on
                self.held_open += 1
            elif complete is False and text is not None and asks_question(text):
                complete = True  # a finished question, whatever the intonation
                self.questions += 1
        state = self.turn_taking.state
        self.turn_taking.do(lambda now: state.turn_judged(pause, complete, probability, ms, now))

    def _words(self) -> str | None:
        """The words so far (None when there are none to read)."""
        if self.words is None:
            return None
        try:
            return self.words()
        except TimeoutError as exc:  # a busy machine: the model's verdict stands
            log.info("The turn's words were not ready in time: %s", exc)
            return None
        except Exception:  # no transcript: the model's verdict stands
            log.warning("The turn's words could not be read", exc_info=True)
            return None

    @property
    def asked(self) -> int:
        with self._lock:
            return len(self.ms)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
