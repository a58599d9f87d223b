"""The turn logic of a voice call, with no audio, model or Qt in it: events in (speech started or
ended, a transcript, the reply's first audio, keys and buttons, clock ticks), the call's phase and
the actions to take out. The call controller feeds it what the VAD, ASR, gateway and speaker
report and carries out what it returns; tests drive it in microseconds.

End of turn: with the silence rule the VAD's `speech_end` (after ≈500 ms of silence) ends the
turn. With the smart rule the VAD reports a short pause (`speech_paused`, ≈200 ms) and the state
asks the end-of-turn model (`AskTurnEnd`); its verdict (`turn_judged`) ends a complete turn, an
incomplete one keeps listening, speech that resumes continues the same utterance, and `tick`
ends the turn after FALLBACK_SILENCE_S of silence whatever the model said (or never said).

Modes: full duplex (the user's speech interrupts the assistant: barge-in), turn-taking (the VAD
ends a turn; the assistant is never interrupted by speech) and push-to-talk (a held key is the
user's turn; pressing it while the assistant speaks interrupts it)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

FALLBACK_SILENCE_S = 2.5  # smart rule: silence after which a turn ends, whatever the model said
SILENCE_END_S = 0.5  # smart rule, the model failed: the silence rule's wait instead


class CallMode(str, Enum):
    DUPLEX = "duplex"
    TURNS = "turns"
    PUSH_TO_TALK = "push_to_talk"


class CallPhase(str, Enum):
    LISTENING = "listening"  # waiting for the user
    USER_SPEAKING = "user_speaking"  # an utterance is being collected
    TRANSCRIBING = "transcribing"  # the utterance ended; its final transcript is on its way
    THINKING = "thinking"  # the user's turn was sent; no reply audio yet
    SPEAKING = "speaking"  # the reply is playing
    PAUSED = "paused"  # mic ignored, session kept
    ENDED = "ended"


@dataclass(frozen=True, slots=True)
class BeginUtterance:
    """Start collecting the user's audio for ASR (partials from now on)."""


@dataclass(frozen=True, slots=True)
class EndUtterance:
    """The user's turn ended: produce its final transcript and report it with `transcript`."""


@dataclass(frozen=True, slots=True)
class AskTurnEnd:
    """The user paused: ask the end-of-turn model whether the turn is over (the utterance's audio
    so far) and report its verdict with `turn_judged(pause, ...)`."""

    pause: int  # this pause's number: a verdict about an earlier pause is ignored


@dataclass(frozen=True, slots=True)
class TurnEnd:
    """How the latest user turn was judged over: clock time `t` and `by` — smart (the model said
    complete), fallback (silence after the model said incomplete), silence (the silence rule, or
    the model failed), key (push-to-talk released) or mute; the model's last probability and
    cost when it was asked."""

    t: float
    by: str
    probability: float | None = None
    model_ms: float | None = None


@dataclass(frozen=True, slots=True)
class CancelUtterance:
    """Drop the audio collected for the utterance (the call was paused or ended mid-sentence)."""


@dataclass(frozen=True, slots=True)
class SendTurn:
    """Append the user's words to the session and generate the reply."""

    text: str


@dataclass(frozen=True, slots=True)
class StopReply:
    """Silence the speaker now, cancel the generation (the KV stays) and trim the assistant's
    turn in the context to what was heard. reason: barge_in | force_listen | paused | ended."""

    reason: str


@dataclass(frozen=True, slots=True)
class EndCall:
    reason: str  # user | idle


Action = BeginUtterance | EndUtterance | AskTurnEnd | CancelUtterance | SendTurn | StopReply | EndCall
REPLYING = (CallPhase.THINKING, CallPhase.SPEAKING)


class CallState:
    def __init__(self, mode: CallMode = CallMode.DUPLEX, idle_timeout_s: float = 300.0, now: float = 0.0) -> None:
        self.mode = CallMode(mode)
        self.idle_timeout_s = idle_timeout_s
        self.phase = CallPhase.LISTENING
        self.muted = False
        self.last_activity = now
        self.barge_ins = 0
        self.turn_end: TurnEnd | None = None  # how the latest user turn ended (for its metrics)
        self.pauses = 0  # pauses heard (AskTurnEnd numbers)
        self._pause_t: float | None = None  # the pending pause: the last voiced sample before it
        self._pause_by = "fallback"  # what ends the pending pause at its deadline
        self._deadline = 0.0
        self._verdict: tuple[float, float] | None = None  # the model's (probability, ms) on it

    # ------------------------------------------------------------------ the user's voice

    def speech_start(self, t: float) -> list[Action]:
        if self.phase is CallPhase.USER_SPEAKING and self._pause_t is not None:
            self._pause_t = None  # the user went on after a pause: the same utterance continues
            self.last_activity = t
            return []
        if self.muted or self.mode is CallMode.PUSH_TO_TALK or self.phase in (CallPhase.PAUSED, CallPhase.ENDED, CallPhase.USER_SPEAKING):
            return []
        if self.phase in REPLYING and self.mode is CallMode.TURNS:
            return []  # turn-taking: the assistant is not interrupted
        self.last_activity = t
        return self._begin("barge_in")

    def speech_end(self, t: float, now: float | None = None) -> list[Action]:
        """The silence rule: the VAD heard the end of the turn (`t`: the last voiced sample;
        `now`: when it decided, default t)."""
        if self.mode is CallMode.PUSH_TO_TALK or self.phase is not CallPhase.USER_SPEAKING:
            return []
        self.last_activity = t
        return self._end(TurnEnd(t if now is None else now, "silence"))

    def speech_paused(self, t: float, now: float | None = None) -> list[Action]:
        """The smart rule: a short pause after the last voiced sample at `t`; ask the model."""
        if self.mode is CallMode.PUSH_TO_TALK or self.phase is not CallPhase.USER_SPEAKING:
            return []
        self.last_activity = t
        self.pauses += 1
        self._pause_t, self._pause_by, self._verdict = t, "fallback", None
        self._deadline = t + FALLBACK_SILENCE_S
        return [AskTurnEnd(self.pauses)]

    def turn_judged(self, pause: int, complete: bool | None, probability: float, model_ms: float,
                    t: float) -> list[Action]:  # fmt: skip
        """The model's verdict on pause number `pause` (complete None: it failed, then the
        silence rule's wait decides)."""
        if pause != self.pauses or self._pause_t is None or self.phase is not CallPhase.USER_SPEAKING:
            return []  # the user spoke again, or the turn ended otherwise meanwhile
        if complete is None:
            self._pause_by, self._deadline = "silence", self._pause_t + SILENCE_END_S
            return self.tick(t)
        self._verdict = (probability, model_ms)
        if not complete:
            return []  # keep listening; the fallback ends the turn if nobody speaks
        return self._end(TurnEnd(t, "smart", probability, model_ms))

    def _end(self, how: TurnEnd) -> list[Action]:
        self.phase = CallPhase.TRANSCRIBING
        self._pause_t = None
        self.turn_end = how
        return [EndUtterance()]

    def key_down(self, t: float) -> list[Action]:
        """The push-to-talk key was pressed."""
        if self.mode is not CallMode.PUSH_TO_TALK or self.muted or self.phase in (CallPhase.PAUSED, CallPhase.ENDED):
            return []
        if self.phase is CallPhase.USER_SPEAKING:
            return []
        self.last_activity = t
        return self._begin("barge_in")

    def key_up(self, t: float) -> list[Action]:
        if self.mode is not CallMode.PUSH_TO_TALK or self.phase is not CallPhase.USER_SPEAKING:
            return []
        self.last_activity = t
        return self._end(TurnEnd(t, "key"))

    def transcript(self, text: str, t: float) -> list[Action]:
        """The final transcript of the utterance that ended (EndUtterance)."""
        if self.phase is not CallPhase.TRANSCRIBING:
            return []  # the call moved on (paused, ended, a new utterance began)
        self.last_activity = t
        if not text.strip():
            self.phase = CallPhase.LISTENING
            return []
        self.phase = CallPhase.THINKING
        return [SendTurn(text.strip())]

    def _begin(self, reason: str) -> list[Action]:
        actions: list[Action] = []
        if self.phase in REPLYING:
            actions.append(StopReply(reason))
            self.barge_ins += 1
        self.phase = CallPhase.USER_SPEAKING
        self._pause_t = None
        return actions + [BeginUtterance()]

    # ------------------------------------------------------------------ the reply

    def reply_started(self, t: float) -> list[Action]:
        """The reply's first sample reached the speaker."""
        if self.phase is CallPhase.THINKING:
            self.phase = CallPhase.SPEAKING
            self.last_activity = t
        return []

    def reply_finished(self, t: float) -> list[Action]:
        """The reply played out (or ended with no audio)."""
        if self.phase in REPLYING:
            self.phase = CallPhase.LISTENING
            self.last_activity = t
        return []

    # ------------------------------------------------------------------ buttons and time

    def force_listen(self, t: float) -> list[Action]:
        """End the assistant's turn now and listen."""
        if self.phase not in REPLYING:
            return []
        self.last_activity = t
        self.phase = CallPhase.LISTENING
        return [StopReply("force_listen")]

    def pause(self, t: float) -> list[Action]:
        if self.phase in (CallPhase.PAUSED, CallPhase.ENDED):
            return []
        actions = self._interrupt("paused")
        self.last_activity = t
        self.phase = CallPhase.PAUSED
        return actions

    def _interrupt(self, reason: str) -> list[Action]:
        """What pausing or ending does to the turn under way."""
        if self.phase in REPLYING:
            return [StopReply(reason)]
        return [CancelUtterance()] if self.phase is CallPhase.USER_SPEAKING else []

    def resume(self, t: float) -> list[Action]:
        if self.phase is CallPhase.PAUSED:
            self.phase = CallPhase.LISTENING
            self.last_activity = t
        return []

    def mute(self, on: bool, t: float) -> list[Action]:
        """Mute the microphone: an utterance in progress ends there (what was said is sent)."""
        self.muted = on
        if on and self.phase is CallPhase.USER_SPEAKING:
            return self._end(TurnEnd(t, "mute"))
        return []

    def set_mode(self, mode: CallMode) -> list[Action]:
        self.mode = CallMode(mode)
        return []

    def tick(self, t: float) -> list[Action]:
        """The smart rule's fallback: a pause that lasted FALLBACK_SILENCE_S ends the turn. Idle
        timeout: nobody spoke and nothing played for idle_timeout_s → the call ends."""
        if self.phase is CallPhase.USER_SPEAKING and self._pause_t is not None and t >= self._deadline - 1e-9:
            p, ms = self._verdict or (None, None)
            return self._end(TurnEnd(t, self._pause_by, p, ms))
        if self.phase in (CallPhase.LISTENING, CallPhase.PAUSED) and t - self.last_activity >= self.idle_timeout_s:
            self.phase = CallPhase.ENDED
            return [EndCall("idle")]
        return []

    def end(self, t: float) -> list[Action]:
        if self.phase is CallPhase.ENDED:
            return []
        actions = self._interrupt("ended")
        self.phase = CallPhase.ENDED
        return actions + [EndCall("user")]
