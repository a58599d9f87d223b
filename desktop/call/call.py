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
import logging
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import numpy as np

from desktop.call.state import (
    Action, BeginUtterance, CallMode, CallPhase, CallState, CancelUtterance, EndCall, EndUtterance, SendTurn, StopReply,
)
from desktop.call.duck import Ducker
from desktop.call.video import VideoFeed, user_content
from desktop.speech.reply_voice import ReplyVoice
from desktop.speech.voice_audio import VoiceEvent, VoiceEventKind
from desktop.errors import OmnideskError
from desktop.media.clock import Clock, RealClock
from desktop.media.frames import level_db
from desktop.model.params import SamplingParams
from desktop.protocol import ChunkEvent, Done, ErrorEvent
from desktop.tasks import TaskSet

log = logging.getLogger(__name__)
PRE_ROLL_S = 0.4  # audio kept from before the VAD's speech start (it fires a little late)
LEVEL_EVERY_S = 0.05  # level meter events at most this often


class Detector(Protocol):
    """Voice activity: frames in, ("start" | "end", clock time of the first/last voiced sample)
    out; `voiced`: the latest audio is speech."""

    voiced: bool

    def feed(self, samples: np.ndarray, t: float) -> list[tuple[str, float]]: ...

    def reset(self) -> None: ...


class Transcriber(Protocol):
    """Speech recognition of one utterance at a time: `begin` with the audio before the speech
    start, `feed` frames (partials go to `on_partial`), `finish` calls `on_text(text, asr_ms)` on
    another thread when the final text is ready; `cancel` drops the utterance. A `close()`, where
    it has one, is called when the call ends (its threads stop)."""

    def begin(self, pre_roll: np.ndarray, on_partial: Callable[[str], None]) -> None: ...

    def feed(self, samples: np.ndarray, voiced: bool) -> None: ...

    def finish(self, on_text: Callable[[str, float], None]) -> None: ...

    def cancel(self) -> None: ...


class Canceller(Protocol):
    """Echo cancellation: a microphone frame at clock time t, less the speaker's echo. A canceller
    with a double-talk detector also has `near_talk` (the user talked over the speaker in the
    last frame) and `false_alarm()` (that was not speech); the call uses them when present."""

    def process(self, samples: np.ndarray, t: float) -> np.ndarray: ...


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
    kv_tokens: int = 0  # the session's KV after the reply
    transcript_t: float | None = None  # clock time the final transcript was there
    first_token_t: float | None = None  # clock time the reply's first text arrived
    first_audio_t: float | None = None  # clock time the reply's first sample reached the speaker
    assistant_text: str = ""
    heard: str | None = None  # set when a barge-in cut the reply: what was kept
    underruns: int | None = None  # times the speaker ran dry during the reply (gaps heard)
    drift_ms: float | None = None  # how much longer than its audio the reply took to play: its gaps' silence
    images: int = 0  # camera frames attached to the user's turn

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
    """kind: phase | level | partial | user | assistant | cut | metrics | error | ended."""

    kind: str
    text: str = ""
    value: float = 0.0
    phase: CallPhase | None = None
    metrics: TurnMetrics | None = None
    reason: str = ""  # cut: why the reply stopped (barge_in | force_listen | paused | ended)


@dataclass(slots=True)
class _Reply:
    request_id: str | None = None
    task: asyncio.Task | None = None
    metrics: TurnMetrics = field(default_factory=lambda: TurnMetrics(0))
    playback: tuple[float, int] | None = None  # the speaker's (starved_s, underruns) as the reply began


class Call:
    def __init__(self, gateway: Any, mic: Any, voice: Any, detector: Detector, transcriber: Transcriber, *,
                 canceller: Canceller | None = None, mode: CallMode = CallMode.DUPLEX, clock: Clock = RealClock(),
                 system: str | None = "You are a helpful voice assistant. Answer briefly, in plain spoken sentences.",
                 params: SamplingParams | None = None, idle_timeout_s: float = 300.0,
                 video: VideoFeed | None = None) -> None:
        self.gateway, self.mic, self.voice, self.detector, self.transcriber = gateway, mic, voice, detector, transcriber
        self.canceller, self.clock, self.system = canceller, clock, system
        self.video = video  # camera frames for the user's turns (a video call), or None
        self.params = params or SamplingParams(max_tokens=200, temperature=0.7, top_p=0.9)
        self.state = CallState(mode, idle_timeout_s, clock.now())
        self.session_id: str | None = None
        self.turns: list[TurnMetrics] = []
        self.listeners: list[Callable[[CallEvent], None]] = []
        # Observers of the raw microphone (samples, clock time of the first one), before echo
        # cancellation, on the media thread; they must only copy (e.g. the recorder's chunker).
        self.frame_taps: list[Callable[[np.ndarray, float], None]] = []
        self._lock = threading.RLock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reply = _Reply()
        self._recent: deque[np.ndarray] = deque()
        self._recent_n = 0
        self._collecting = False
        self._pending_end_t: float | None = None
        self._last_level = -1.0
        self._tasks = TaskSet()
        self.speaker = ReplyVoice(voice)  # the reply's text deltas → the voice
        self.ducker = Ducker(getattr(voice, "sink", None), on_false_alarm=getattr(canceller, "false_alarm", None))

    # ------------------------------------------------------------------ life

    async def start(self) -> None:
        """Open the call's session and start listening."""
        self._loop = asyncio.get_running_loop()
        self.session_id = await self.gateway.create_session(self.system, call=True)
        self.voice.add_listener(self._on_voice)
        self.mic.start()
        self._emit(CallEvent("phase", phase=self.state.phase))

    async def end(self) -> None:
        """Hang up: stop the reply, close the session, release the microphone."""
        self._do(self.state.end)
        await self._settle()

    async def _settle(self) -> None:
        await self._tasks.wait()

    @property
    def phase(self) -> CallPhase:
        return self.state.phase

    # ------------------------------------------------------------------ the microphone (media thread)

    def pump(self, timeout: float = 0.0) -> int:
        """Handle every microphone frame not seen yet; returns how many. Also checks the idle timeout."""
        frames = self.mic.read(timeout=timeout)
        for samples, t, level in zip(frames.samples, frames.times, frames.levels):
            self._frame(samples, float(t), float(level))
        if self.video is not None:
            self.video.tick(self.clock.now())
        self._do(self.state.tick)
        return len(frames)

    def _frame(self, samples: np.ndarray, t: float, level: float) -> None:
        if t - self._last_level >= LEVEL_EVERY_S:
            self._last_level = t
            self._emit(CallEvent("level", value=level))
        for tap in self.frame_taps:
            try:
                tap(samples, t)
            except Exception:  # an observer's bug must not cost the call a frame
                log.exception("microphone tap failed")
        clean = self.canceller.process(samples, t) if self.canceller is not None else samples
        self._remember(clean)
        playing = self.state.phase is CallPhase.SPEAKING and self.state.mode is CallMode.DUPLEX
        self.ducker.frame(level_db(clean), t, playing, bool(getattr(self.canceller, "near_talk", False)))
        for kind, at in self.detector.feed(clean, t):
            if kind != "start":
                self._pending_end_t = at
            self._do(self.state.speech_start if kind == "start" else self.state.speech_end, at)
        if self._collecting:
            self.transcriber.feed(clean, self.detector.voiced)

    def _remember(self, clean: np.ndarray) -> None:
        self._recent.append(clean)
        self._recent_n += clean.size
        keep = int(PRE_ROLL_S * getattr(self.mic, "sample_rate", 16000))
        while self._recent and self._recent_n - self._recent[0].size >= keep:
            self._recent_n -= self._recent.popleft().size

    # ------------------------------------------------------------------ buttons and keys (any thread)

    def key_down(self) -> None:
        self._do(self.state.key_down)

    def key_up(self) -> None:
        self._pending_end_t = self.clock.now()
        self._do(self.state.key_up)

    def force_listen(self) -> None:
        self._do(self.state.force_listen)

    def pause(self) -> None:
        self._do(self.state.pause)
        self._duplex(paused=True)

    def resume(self) -> None:
        self._do(self.state.resume)
        self._duplex(paused=False)

    def _duplex(self, paused: bool) -> None:
        loop, mark = self._loop, getattr(self.gateway, "pause_call", None)
        if loop is not None and mark is not None and self.session_id is not None:
            loop.call_soon_threadsafe(mark, self.session_id, paused)

    def set_muted(self, on: bool) -> None:
        self._do(lambda now: self.state.mute(on, now))

    def set_mode(self, mode: CallMode) -> None:
        with self._lock:
            self.state.set_mode(mode)

    def _do(self, transition: Callable[[float], list[Action]], at: float | None = None) -> None:
        """One transition of the turn logic (at the clock's now unless `at`), then its actions;
        a change of phase is reported once it happened."""
        with self._lock:
            before = self.state.phase
            actions = transition(self.clock.now() if at is None else at)
            after = self.state.phase
        if after is not before:
            self._emit(CallEvent("phase", phase=after))
        self._act(actions)

    # ------------------------------------------------------------------ actions

    def _act(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, BeginUtterance):
                self._collecting = True
                pre = np.concatenate(list(self._recent)) if self._recent else np.zeros(0, np.float32)
                self.transcriber.begin(pre, lambda text: self._emit(CallEvent("partial", text)))
            elif isinstance(action, EndUtterance):
                self._collecting = False
                end_t = self._pending_end_t if self._pending_end_t is not None else self.clock.now()
                self.transcriber.finish(lambda text, ms, end_t=end_t: self._transcribed(text, ms, end_t))
            elif isinstance(action, CancelUtterance):
                self._collecting = False
                self.transcriber.cancel()
            elif isinstance(action, SendTurn):
                self._spawn(self._run_reply(action.text))
            elif isinstance(action, StopReply):
                self._stop_reply(action.reason)
            elif isinstance(action, EndCall):
                self._spawn(self._close(action.reason))

    def _transcribed(self, text: str, asr_ms: float, end_t: float) -> None:
        """The final transcript of an utterance (on the transcriber's thread)."""
        with self._lock:
            self._last_asr = (text, asr_ms, end_t)
        if text.strip():
            self._emit(CallEvent("user", text.strip()))
        self._do(lambda now: self.state.transcript(text, now))

    def _spawn(self, coro: Any) -> None:
        loop = self._loop
        if loop is None:
            coro.close()
            return

        def create() -> None:  # on the loop
            self._tasks.spawn(coro)

        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            create()
        else:
            loop.call_soon_threadsafe(create)

    # ------------------------------------------------------------------ the reply (asyncio loop)

    async def _run_reply(self, text: str) -> None:
        _, asr_ms, end_t = getattr(self, "_last_asr", (text, None, None))
        metrics = TurnMetrics(len(self.turns) + 1, text, end_t, asr_ms, transcript_t=self.clock.now())
        self.turns.append(metrics)
        reply = self._reply = _Reply(metrics=metrics)
        reply.task = asyncio.current_task()
        try:
            # both at once: the session runs them in order, so the reply needs no round trip between
            frames = self.video.take() if self.video is not None else []
            content = user_content(text, frames)
            metrics.images = len(frames)
            appended = self.gateway.append_input(self.session_id, [{"role": "user", "content": content}])
            stream = self.gateway.generate_stream(self.session_id, self.params)
            reply.request_id = stream.request_id
            try:
                await _drain(appended)
            except OmnideskError:  # the words did not go in: no reply to them
                await self._cancel(stream.request_id)
                raise
            if self.state.phase is not CallPhase.THINKING:  # cut while the input was read: not a word
                await self._cancel(stream.request_id)
                await _drain(stream)
                return
            self.speaker.begin(stream.request_id)
            async for event in stream:
                if isinstance(event, ChunkEvent) and event.text_delta:
                    if metrics.first_token_t is None:
                        metrics.first_token_t = self.clock.now()
                    metrics.assistant_text += event.text_delta
                    self.speaker.delta(stream.request_id, event.text_delta)
                    self._emit(CallEvent("assistant", event.text_delta))
                elif isinstance(event, Done):
                    s = event.stats
                    metrics.ttft_ms, metrics.cached_tokens, metrics.new_tokens = s.ttft_ms, s.cached_tokens, s.new_tokens
                    metrics.kv_tokens = s.input_tokens + s.generated_tokens
                elif isinstance(event, ErrorEvent):
                    raise OmnideskError(event.message, code=event.code)
            self.speaker.end(stream.request_id)
            if not getattr(self.voice, "available", True):  # no sound output: the text was the reply
                self._do(self.state.reply_finished)
        except OmnideskError as exc:
            log.warning("Call reply failed: %s", exc.message)
            self._emit(CallEvent("error", exc.message))
            if self._reply is reply:
                self._do(self.state.reply_finished)
        finally:
            if metrics.heard is None:
                self._emit(CallEvent("metrics", metrics=metrics))

    def _stop_reply(self, reason: str) -> None:
        """Silence now (any thread); cancel and trim the context on the loop."""
        reply = self._reply
        if reply.request_id is not None:
            self.speaker.drop(reply.request_id)  # the speaker is silent within one audio block
        self.ducker.release()  # the reply is gone: the next one plays at full volume
        self._spawn(self._cut(reply, reason))

    async def _cut(self, reply: _Reply, reason: str) -> None:
        if reply.request_id is not None:
            await self._cancel(reply.request_id)
        if reply.task is not None and reply.task is not asyncio.current_task():
            await asyncio.gather(reply.task, return_exceptions=True)
        if reply.request_id is None:
            return
        heard = self.voice.heard(reply.request_id)
        reply.metrics.heard = heard
        try:
            await self.gateway.truncate_reply(self.session_id, heard)
        except OmnideskError as exc:  # nothing generated yet, or the session is gone
            log.info("Nothing truncated after a %s: %s", reason, exc.message)
        self._emit(CallEvent("cut", heard, reason=reason))
        self._emit(CallEvent("metrics", metrics=reply.metrics))

    async def _cancel(self, request_id: str) -> None:
        try:
            await self.gateway.cancel(request_id)
        except OmnideskError:
            pass  # it ended meanwhile

    async def _close(self, reason: str) -> None:
        self.voice.remove_listener(self._on_voice)
        await self._tasks.settle()
        if self.session_id is not None:
            try:
                await self.gateway.end_session(self.session_id)
            except OmnideskError as exc:
                log.info("Ending the call's session: %s", exc.message)
        self.mic.close()
        close = getattr(self.transcriber, "close", None)
        if close is not None:  # its thread would keep the call (and its resamplers) alive to the exit
            await asyncio.to_thread(close)
        self._emit(CallEvent("ended", reason))

    # ------------------------------------------------------------------ the voice (its threads)

    def _on_voice(self, event: VoiceEvent) -> None:
        reply = self._reply
        if event.request_id is None or event.request_id != reply.request_id or event.replay:
            return
        if event.kind is VoiceEventKind.STARTED:
            reply.metrics.first_audio_t = self.voice.first_audio_at(event.request_id) or self.clock.now()
            reply.playback = self._playback()
            self._do(self.state.reply_started)
        elif event.kind in (VoiceEventKind.FINISHED, VoiceEventKind.FAILED) and not event.stopped:
            self._played(reply)
            self._do(self.state.reply_finished)

    def _playback(self) -> tuple[float, int] | None:
        """(seconds of silence from running dry, underruns) of the speaker, where it can tell."""
        stats = getattr(getattr(self.voice, "sink", None), "stats", None)
        if stats is None:
            return None
        s = stats()
        return float(s.get("starved_s", 0.0)), int(s.get("underruns", 0))

    def _played(self, reply: _Reply) -> None:
        """The reply played out: its gaps and drift go into its metrics (reported again). The
        drift is the silence the speaker played while it ran dry, counted by the speaker itself:
        wall-clock readings around the device's read-ahead came out below zero."""
        start, end = reply.playback, self._playback()
        if start is None or end is None:
            return
        reply.metrics.underruns = end[1] - start[1]
        reply.metrics.drift_ms = max(end[0] - start[0], 0.0) * 1000.0
        self._emit(CallEvent("metrics", metrics=reply.metrics))

    def _emit(self, event: CallEvent) -> None:
        for listener in list(self.listeners):
            try:
                listener(event)
            except Exception:
                log.exception("call listener failed on %s", event.kind)


async def _drain(stream: Any) -> None:
    last = None
    async for event in stream:
        last = event
    if isinstance(last, ErrorEvent):
        raise OmnideskError(last.message, code=last.code, retryable=last.retryable)
