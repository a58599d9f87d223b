"""A voice call, without Qt: microphone frames → echo cancellation → voice activity → speech
recognition → one gateway session for the whole call (its KV grows turn by turn) → the reply,
spoken by the Voice as it streams; the user's speech over the reply cuts it (barge-in) and the
assistant's turn in the context becomes what the user heard.

Threads: `pump()` runs on a media thread (it reads the microphone and handles each frame); the
gateway work runs as tasks on the asyncio loop given at start; the voice reports from its own
threads. The turn logic (CallState) is shared by all three under one lock. Listeners get
CallEvents on whichever thread produced them (the UI hops to its own)."""

from __future__ import annotations

import asyncio
from typing import Any

from desktop.call.cut import ReplyCut
from desktop.call.draft import Draft
from desktop.call.duck import Ducker
from desktop.call.end_of_turn import EndOfTurn, TurnModel
from desktop.call.events import CallEvent, CallEvents, TurnMetrics
from desktop.call.mic_frames import Canceller, Detector, MicFrames
from desktop.call.playback import Playback
from desktop.call.replies import Replies
from desktop.call.session import CallSession
from desktop.call.state import (
    Action, AskTurnEnd, BeginUtterance, CallMode, CallPhase, CallState, CancelUtterance, EndCall, EndUtterance, SendTurn, StopReply,
)
from desktop.call.tasks import CallTasks
from desktop.call.turn_taking import TurnTaking
from desktop.call.utterance import Transcriber, Utterance
from desktop.call.video import VideoFeed
from desktop.media.clock import Clock, RealClock
from desktop.model.params import SamplingParams
from desktop.speech.reply_voice import ReplyVoice
from desktop.protocol.engine import EngineApi

__all__ = ["Call", "CallEvent", "Canceller", "Detector", "Transcriber", "TurnMetrics"]


class Call:
    """One voice call, built from its parts (each in its own file): MicFrames (each microphone
    frame), Utterance (the user's speech → its transcript), TurnTaking (who has the turn),
    Replies (the assistant's answer, spoken as it streams), ReplyCut (a barge-in), Playback (the
    voice's reports), CallSession (the gateway session) and CallTasks (its asyncio tasks).
    `system` and `params`: the system prompt and sampling of the call, the user's choices (the
    app's CallFactory passes the preset's prompt and the Settings' sampling, as a chat gets);
    without them, no system prompt and greedy replies."""

    def __init__(self, gateway: EngineApi, mic: Any, voice: Any, detector: Detector, transcriber: Transcriber, *,
                 canceller: Canceller | None = None, mode: CallMode = CallMode.DUPLEX, clock: Clock = RealClock(),
                 system: str | None = None, params: SamplingParams | None = None, idle_timeout_s: float = 300.0,
                 video: VideoFeed | None = None, turn_model: TurnModel | None = None) -> None:
        self.gateway, self.mic, self.voice, self.detector, self.transcriber = gateway, mic, voice, detector, transcriber
        self.canceller, self.clock, self.system = canceller, clock, system
        self.video = video  # camera frames for the user's turns (a video call), or None
        self.state = CallState(mode, idle_timeout_s, clock.now())
        self.events = CallEvents()
        self.listeners = self.events.listeners
        self.tasks = CallTasks()
        self.session = CallSession(gateway, self.tasks)
        self.turn_taking = TurnTaking(self.state, clock, self.events.emit, self._act)
        self.speaker = ReplyVoice(voice)  # the reply's text deltas → the voice
        self.ducker = Ducker(voice, on_false_alarm=getattr(canceller, "false_alarm", None))
        self.draft = Draft(self.session, self.tasks)  # the user's words prefilled while they speak
        self.utterance = Utterance(transcriber, self.turn_taking, clock, self.events.emit,
                                   getattr(mic, "sample_rate", 16000), self.draft)
        # the smart end of turn (the detector then reports pauses), or None: the silence rule
        self.end_of_turn = EndOfTurn(turn_model, self.turn_taking, words=getattr(transcriber, "words_so_far", None)) \
            if turn_model is not None else None
        self.mic_frames = MicFrames(detector, canceller, self.ducker, self.utterance, self.turn_taking, self.events.emit,
                                    self.end_of_turn)
        # Observers of the raw microphone (samples, clock time of the first one), before echo
        # cancellation, on the media thread; they must only copy (e.g. the recorder's chunker).
        self.frame_taps = self.mic_frames.frame_taps
        self.replies = Replies(self.session, self.draft, self.speaker, voice, self.utterance, self.turn_taking, clock,
                               self.events.emit, video,
                               params or SamplingParams())
        self.turns = self.replies.turns
        self.cut = ReplyCut(self.replies, self.session, self.speaker, voice, self.ducker, self.tasks, self.events.emit)
        self.playback = Playback(voice, self.replies, self.turn_taking, clock, self.events.emit)

    @property
    def params(self) -> SamplingParams:
        """The sampling of the call's replies (read at each turn)."""
        return self.replies.params

    @params.setter
    def params(self, params: SamplingParams) -> None:
        self.replies.params = params

    @property
    def session_id(self) -> str | None:
        return self.session.id

    # ------------------------------------------------------------------ life

    async def start(self) -> None:
        """Open the call's session and start listening."""
        self.tasks.bind()
        await self.session.open(self.system)
        self.voice.add_listener(self.playback.on_voice)
        self.mic.start()
        self.events.emit(CallEvent("phase", phase=self.state.phase))

    async def end(self) -> None:
        """Hang up: stop the reply, close the session, release the microphone."""
        self.turn_taking.do(self.state.end)
        await self.tasks.settle()

    @property
    def phase(self) -> CallPhase:
        return self.state.phase

    # ------------------------------------------------------------------ the microphone (media thread)

    def pump(self, timeout: float = 0.0) -> int:
        """Handle every microphone frame not seen yet; returns how many. Also checks the idle timeout."""
        frames = self.mic.read(timeout=timeout)
        for samples, t, level in zip(frames.samples, frames.times, frames.levels):
            self.mic_frames.frame(samples, float(t), float(level))
        if self.video is not None:
            self.video.tick(self.clock.now())
        self.turn_taking.do(self.state.tick)
        return len(frames)

    # ------------------------------------------------------------------ buttons and keys (any thread)

    def key_down(self) -> None:
        self.turn_taking.do(self.state.key_down)

    def key_up(self) -> None:
        self.utterance.end_t = self.clock.now()
        self.turn_taking.do(self.state.key_up)

    def force_listen(self) -> None:
        self.turn_taking.do(self.state.force_listen)

    def pause(self) -> None:
        self.turn_taking.do(self.state.pause)
        self.session.mark_paused(True)

    def resume(self) -> None:
        self.turn_taking.do(self.state.resume)
        self.session.mark_paused(False)

    def set_muted(self, on: bool) -> None:
        self.turn_taking.do(lambda now: self.state.mute(on, now))

    def set_mode(self, mode: CallMode) -> None:
        self.turn_taking.set_mode(mode)

    # ------------------------------------------------------------------ the turn logic's actions

    def _act(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, BeginUtterance):
                self.utterance.begin()
                if self.end_of_turn is not None:
                    self.end_of_turn.begin()
            elif isinstance(action, AskTurnEnd):
                if self.end_of_turn is not None:
                    self.end_of_turn.ask(action)
            elif isinstance(action, EndUtterance):
                self.utterance.finish()
            elif isinstance(action, CancelUtterance):
                self.utterance.cancel()
            elif isinstance(action, SendTurn):
                self.tasks.spawn(self.replies.run(action.text))
            elif isinstance(action, StopReply):
                self.cut.stop(action.reason)
            elif isinstance(action, EndCall):
                self.tasks.spawn(self._close(action.reason))

    async def _close(self, reason: str) -> None:
        self.voice.remove_listener(self.playback.on_voice)
        await self.tasks.wait_others()
        await self.session.end()
        self.mic.close()
        if self.end_of_turn is not None:
            self.end_of_turn.close()
        close = getattr(self.transcriber, "close", None)
        if close is not None:  # its thread would keep the call (and its resamplers) alive to the exit
            await asyncio.to_thread(close)
        self.events.emit(CallEvent("ended", reason))
