"""Each microphone frame of a call, on its media thread: the level meter, the raw taps (the
recorder), echo cancellation, the ducker (the speaker goes quiet at the user's first word over
a reply), the VAD (speech start, pause and end go to the turn logic; the end-of-turn model hears
the clean audio) and the clean audio to the utterance."""

from __future__ import annotations

import logging
from typing import Callable, Protocol

import numpy as np

from desktop.call.duck import Ducker
from desktop.call.end_of_turn import EndOfTurn
from desktop.call.events import CallEvent
from desktop.call.state import CallMode, CallPhase
from desktop.call.turn_taking import TurnTaking
from desktop.call.utterance import Utterance
from desktop.media.frames import level_db

log = logging.getLogger(__name__)
LEVEL_EVERY_S = 0.05  # level meter events at most this often


class Detector(Protocol):
    """Voice activity: frames in, ("start" | "end" | "pause", clock time of the first/last voiced
    sample) out — "end" ends the turn (the silence rule), "pause" is a short one the end-of-turn
    model judges (the smart rule); `voiced`: the latest audio is speech."""

    voiced: bool

    def feed(self, samples: np.ndarray, t: float) -> list[tuple[str, float]]: ...

    def reset(self) -> None: ...


class Canceller(Protocol):
    """Echo cancellation: a microphone frame at clock time t, less the speaker's echo. A canceller
    with a double-talk detector also has `near_talk` (the user talked over the speaker in the
    last frame) and `false_alarm()` (that was not speech); the call uses them when present."""

    def process(self, samples: np.ndarray, t: float) -> np.ndarray: ...


class MicFrames:
    """`frame(samples, t, level)` for each microphone frame. `frame_taps`: observers of the raw
    microphone (samples, clock time of the first one), before echo cancellation, on the media
    thread; they must only copy (e.g. the recorder's chunker). `end_of_turn` (the smart rule)
    hears every clean frame."""

    def __init__(self, detector: Detector, canceller: Canceller | None, ducker: Ducker, utterance: Utterance,
                 turn_taking: TurnTaking, emit: Callable[[CallEvent], None],
                 end_of_turn: EndOfTurn | None = None) -> None:  # fmt: skip
        self.detector, self.canceller, self.ducker, self.utterance = detector, canceller, ducker, utterance
        self.turn_taking, self.emit, self.end_of_turn = turn_taking, emit, end_of_turn
        self.frame_taps: list[Callable[[np.ndarray, float], None]] = []
        self._last_level = -1.0

    def frame(self, samples: np.ndarray, t: float, level: float) -> None:
        if t - self._last_level >= LEVEL_EVERY_S:
            self._last_level = t
            self.emit(CallEvent("level", value=level))
        for tap in self.frame_taps:
            try:
                tap(samples, t)
            except Exception:  # an observer's bug must not cost the call a frame
                log.exception("microphone tap failed")
        clean = self.canceller.process(samples, t) if self.canceller is not None else samples
        self.utterance.remember(clean)
        if self.end_of_turn is not None:
            self.end_of_turn.hear(clean)
        state = self.turn_taking.state
        playing = state.phase is CallPhase.SPEAKING and state.mode is CallMode.DUPLEX
        self.ducker.frame(level_db(clean), t, playing, bool(getattr(self.canceller, "near_talk", False)))
        for kind, at in self.detector.feed(clean, t):
            if kind == "start":
                self.turn_taking.do(state.speech_start, at)
                continue
            self.utterance.end_t = at  # the last voiced sample so far
            judged = state.speech_paused if kind == "pause" else state.speech_end
            self.turn_taking.do(lambda now, at=at, judged=judged: judged(at, now))  # now: when it was decided
        if self.utterance.collecting:
            self.utterance.feed(clean, self.detector.voiced)
