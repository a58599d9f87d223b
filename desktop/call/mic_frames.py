"""Each microphone frame of a call, on its media thread: the level meter, the raw taps (the
recorder), echo cancellation, the ducker (the speaker goes quiet at the user's first word over
a reply), the VAD (speech start and end go to the turn logic) and the clean audio to the
utterance."""

from __future__ import annotations

import logging
from typing import Callable, Protocol

import numpy as np

from desktop.call.duck import Ducker
from desktop.call.events import CallEvent
from desktop.call.state import CallMode, CallPhase
from desktop.call.turn_taking import TurnTaking
from desktop.call.utterance import Utterance
from desktop.media.frames import level_db

log = logging.getLogger(__name__)
LEVEL_EVERY_S = 0.05  # level meter events at most this often


class Detector(Protocol):
    """Voice activity: frames in, ("start" | "end", clock time of the first/last voiced sample)
    out; `voiced`: the latest audio is speech."""

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
    thread; they must only copy (e.g. the recorder's chunker)."""

    def __init__(self, detector: Detector, canceller: Canceller | None, ducker: Ducker, utterance: Utterance,
                 turn_taking: TurnTaking, emit: Callable[[CallEvent], None]) -> None:  # fmt: skip
        self.detector, self.canceller, self.ducker, self.utterance = detector, canceller, ducker, utterance
        self.turn_taking, self.emit = turn_taking, emit
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
        state = self.turn_taking.state
        playing = state.phase is CallPhase.SPEAKING and state.mode is CallMode.DUPLEX
        self.ducker.frame(level_db(clean), t, playing, bool(getattr(self.canceller, "near_talk", False)))
        for kind, at in self.detector.feed(clean, t):
            if kind != "start":
                self.utterance.end_t = at
            self.turn_taking.do(state.speech_start if kind == "start" else state.speech_end, at)
        if self.utterance.collecting:
            self.utterance.feed(clean, self.detector.voiced)
