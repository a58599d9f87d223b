"""A call's end-of-turn path without the gateway or the speaker, on a virtual clock: spoken turns
played into the fake microphone → MicFrames (silero-vad; pauses for the smart rule) → CallState
→ the end-of-turn model → when and how each turn was judged over. The model runs at once, but
its verdict reaches the turn logic when the clock has moved on by what the run cost (as from
EndOfTurn's own thread in a call: speech that resumed meanwhile makes the verdict stale). Used
by tests/call/test_call_paused_speech.py and bench/turn_end.py."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from desktop.call.duck import Ducker
from desktop.call.end_of_turn import EndOfTurn
from desktop.call.mic_frames import MicFrames
from desktop.call.parts import CALL_VAD, CALL_VAD_PAUSES, VadDetector
from desktop.call.state import AskTurnEnd, BeginUtterance, CallMode, CallState, EndUtterance, TurnEnd
from desktop.call.turn_taking import TurnTaking
from desktop.call.turn_words import asks_question, leaves_open
from desktop.call.utterance import Utterance
from desktop.media.clock import VirtualClock
from desktop.media.fake_mic import FakeMicrophone
from desktop.media.paused_speech import RATE, SpokenTurn
from desktop.media.vad import SileroVAD

FRAME_S = 0.02


class _Quiet:
    """No speaker to duck, no words to transcribe."""

    def duck(self) -> None: ...

    def unduck(self) -> None: ...

    def begin(self, pre_roll, on_partial) -> None: ...

    def feed(self, samples, voiced) -> None: ...

    def finish(self, on_text) -> None: ...

    def cancel(self) -> None: ...


@dataclass
class Heard:
    """One spoken turn through the rig: clock times of its audio, its end of speech, and each
    turn end (its TurnEnd, and when it was decided counting the model's own run time)."""

    turn: SpokenTurn
    start: float
    ends: list[tuple[TurnEnd, float]]
    begins: int  # BeginUtterance actions: 1 when the pause did not split the utterance
    asked: list = None  # (clock time, model probability, words read) at each pause judged

    @property
    def eos(self) -> float:
        return self.start + self.turn.end

    @property
    def cut_off(self) -> bool:
        """A turn ended before the user's last word (inside a pause)."""
        return any(at < self.eos - 1e-6 for _, at in self.ends)

    @property
    def eos_to_decision_ms(self) -> float | None:
        after = [at for _, at in self.ends if at >= self.eos - 1e-6]
        return (after[0] - self.eos) * 1000.0 if after else None


class TurnRig:
    """`model`: an end-of-turn model (the smart rule) or None (the silence rule, CALL_VAD).
    `asr` (optional, with the model): a speech recogniser whose text of the turn so far keeps a
    turn open that ends on an open word, as EndOfTurn's `words` does in a call (it runs beside
    the model there: the verdict waits for the slower of the two)."""

    def __init__(self, model=None, asr=None) -> None:
        self.asr = asr
        self.held_open = 0
        self.questions = 0
        self.words_ms: list[float] = []  # the words' pass, where it ran
        self.asked: list[tuple[float, float, str | None]] = []  # (clock time, model probability, words) per pause
        self.clock = VirtualClock()
        self.mic = FakeMicrophone(self.clock, device_rate=RATE)
        self.mic.start()
        self.state = CallState(CallMode.DUPLEX, idle_timeout_s=1e9)
        self.turn_taking = TurnTaking(self.state, self.clock, lambda e: None, self._act)
        quiet = _Quiet()
        self.utterance = Utterance(quiet, self.turn_taking, self.clock, lambda e: None)
        smart = model is not None
        detector = VadDetector(SileroVAD(CALL_VAD_PAUSES if smart else CALL_VAD), pauses=smart)
        self.model = model
        self.judge = EndOfTurn(model, self.turn_taking, inline=True) if smart else None  # hears, keeps the turn
        self.model_ms: list[float] = []
        self._due: list[tuple[float, int, object]] = []  # (clock time, pause, verdict) on their way
        self.frames = MicFrames(detector, None, Ducker(quiet), self.utterance, self.turn_taking, lambda e: None,
                                self.judge)
        self._ends: list[tuple[TurnEnd, float]] = []
        self._begins = 0

    def _act(self, actions: list) -> None:
        for action in actions:
            if isinstance(action, BeginUtterance):
                self._begins += 1
                self.utterance.begin()
                if self.judge is not None:
                    self.judge.begin()
            elif isinstance(action, AskTurnEnd) and self.judge is not None:
                audio = self.judge.turn_audio()
                try:
                    verdict = self.model.predict(audio)
                except Exception:
                    verdict = None
                ms = verdict.ms if verdict is not None else 0.0
                self.model_ms.append(ms)
                text = None
                if verdict is not None and self.asr is not None:
                    words = self.asr.transcribe(audio)
                    text = words.text
                    self.words_ms.append(words.ms)
                    ms = max(ms, words.ms)
                    if verdict.complete and leaves_open(words.text):
                        self.held_open += 1
                        verdict = verdict._replace(complete=False)
                    elif not verdict.complete and asks_question(words.text):
                        self.questions += 1
                        verdict = verdict._replace(complete=True)
                self.asked.append((self.clock.now(), verdict.probability if verdict is not None else -1.0, text))
                self._due.append((self.clock.now() + ms / 1000.0, action.pause, verdict))
            elif isinstance(action, EndUtterance):
                end = self.state.turn_end
                self._ends.append((end, end.t))
                self.utterance.collecting = False
                self.turn_taking.do(lambda now: self.state.transcript("words", now))  # the reply…
                self.turn_taking.do(self.state.reply_finished)  # …played out: listening again

    def run_for(self, seconds: float) -> None:
        stop = self.clock.now() + seconds
        while self.clock.now() < stop - 1e-9:
            self.clock.advance(FRAME_S)
            self.mic.pump()
            frames = self.mic.read()
            for samples, t, level in zip(frames.samples, frames.times, frames.levels):
                self.frames.frame(samples, float(t), float(level))
            self._deliver()
            self.turn_taking.do(self.state.tick)

    def _deliver(self) -> None:
        now = self.clock.now()
        due, self._due = [d for d in self._due if d[0] <= now + 1e-9], [d for d in self._due if d[0] > now + 1e-9]
        for at, pause, v in due:
            if v is None:  # the model broke: the silence rule's wait
                self.turn_taking.do(lambda t, p=pause: self.state.turn_judged(p, None, 0.0, 0.0, t), at)
            else:
                self.turn_taking.do(lambda t, p=pause, v=v: self.state.turn_judged(p, v.complete, v.probability, v.ms, t), at)

    def hear(self, turn: SpokenTurn, lead_s: float = 0.5, tail_s: float = 3.0) -> Heard:
        """Play `turn` after `lead_s` of silence and listen `tail_s` past its end."""
        self._ends, self._begins = [], 0
        first = len(self.asked)
        start = self.mic.play(np.asarray(turn.audio, np.float32), RATE, at=self.clock.now() + lead_s)
        self.run_for(lead_s + turn.end + tail_s)
        return Heard(turn, start, list(self._ends), self._begins, self.asked[first:])

    def close(self) -> None:
        self.mic.close()
        if self.judge is not None:
            self.judge.close()
