"""The turn logic of a voice call, with no audio, model or Qt in it: events in (speech started or
ended, a transcript, the reply's first audio, keys and buttons, clock ticks), the call's phase and
the actions to take out. The call controller feeds it what the VAD, ASR, gateway and speaker
report and carries out what it returns; tests drive it in microseconds.

Modes: full duplex (the user's speech interrupts the assistant: barge-in), turn-taking (the VAD
ends a turn; the assistant is never interrupted by speech) and push-to-talk (a held key is the
user's turn; pressing it while the assistant speaks interrupts it)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


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


Action = BeginUtterance | EndUtterance | CancelUtterance | SendTurn | StopReply | EndCall
REPLYING = (CallPhase.THINKING, CallPhase.SPEAKING)


class CallState:
    def __init__(self, mode: CallMode = CallMode.DUPLEX, idle_timeout_s: float = 300.0, now: float = 0.0) -> None:
        self.mode = CallMode(mode)
        self.idle_timeout_s = idle_timeout_s
        self.phase = CallPhase.LISTENING
        self.muted = False
        self.last_activity = now
        self.barge_ins = 0

    # ------------------------------------------------------------------ the user's voice

    def speech_start(self, t: float) -> list[Action]:
        if self.muted or self.mode is CallMode.PUSH_TO_TALK or self.phase in (CallPhase.PAUSED, CallPhase.ENDED, CallPhase.USER_SPEAKING):
            return []
        if self.phase in REPLYING and self.mode is CallMode.TURNS:
            return []  # turn-taking: the assistant is not interrupted
        self.last_activity = t
        return self._begin("barge_in")

    def speech_end(self, t: float) -> list[Action]:
        if self.mode is CallMode.PUSH_TO_TALK or self.phase is not CallPhase.USER_SPEAKING:
            return []
        self.last_activity = t
        self.phase = CallPhase.TRANSCRIBING
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
        self.phase = CallPhase.TRANSCRIBING
        return [EndUtterance()]

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
            self.phase = CallPhase.TRANSCRIBING
            return [EndUtterance()]
        return []

    def set_mode(self, mode: CallMode) -> list[Action]:
        self.mode = CallMode(mode)
        return []

    def tick(self, t: float) -> list[Action]:
        """Idle timeout: nobody spoke and nothing played for idle_timeout_s → the call ends."""
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
