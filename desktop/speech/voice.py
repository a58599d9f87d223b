"""Spoken replies without Qt: loads the TTS lazily, relays streamed text to the output pipeline from
its own thread, keeps each reply's audio for Replay and reports speaking started/finished/failed."""

from __future__ import annotations

import logging
import queue
import threading
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from desktop.bounded import BoundedDict
from desktop.speech.heard import SpokenLog
from desktop.speech.pipeline import AudioChunk, Pipeline, PipelineDone, PipelineError, Segment, SegmenterConfig
from desktop.speech.speech_types import AudioSink, TTSEngine
from desktop.speech.voice_audio import KEEP_REPLIES, KEEP_SECONDS, KeptAudio, Play, VoiceEvent, VoiceEventKind
from desktop.errors import OmnideskError
from desktop.media.clock import Clock, RealClock

if TYPE_CHECKING:
    from desktop.settings import Settings

log = logging.getLogger(__name__)
LOADING_MESSAGE = "Loading voice…"
_POLL_S = 0.02  # how often the relay thread looks for replies that have played out
_REPLAY_CHUNK_S = 0.25  # replay is written in pieces this long, so that a stop is seen quickly
_FINISH_SLACK_S = 1.0  # a sink that stops draining still reports "finished" this long after
_DEAD_KEPT = 4096  # stopped or failed request ids remembered, so that their late text is dropped


class Voice:
    """Speaks streamed replies: `speak_begin(rid)`, `speak_delta(rid, text)` as text arrives (never
    blocks: a relay thread feeds the pipeline), `speak_end(rid)`. `stop()` silences at once.
    Events go to the listeners on the voice's own threads: hop to the UI thread there. Request ids
    are not reused. `available` is False (with `reason`) when there is no sound output; then every
    call is a no-op."""

    def __init__(self, tts_factory: Callable[[], TTSEngine] | None, sink: AudioSink | None, *,
                 config: SegmenterConfig = SegmenterConfig(), clock: Clock = RealClock(),
                 keep: int = KEEP_REPLIES, keep_s: float = KEEP_SECONDS, owns_sink: bool = False,
                 engine: tuple[str, str | None] | None = None, reason: str | None = None) -> None:
        self.available = sink is not None and tts_factory is not None
        self.reason = None if self.available else (reason or "Audio is off")
        self._factory, self._sink, self._config, self._clock = tts_factory, sink, config, clock
        self._owns_sink, self._engine = owns_sink, engine
        self._listeners: list[Callable[[VoiceEvent], None]] = []
        self._lock = threading.Lock()  # plays and dead ids; never held while emitting
        self._commands: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self._pipeline: Pipeline | None = None
        self._plays: dict[str, Play] = {}  # sink id -> what is being spoken there
        self._dead: BoundedDict[str, None] = BoundedDict(_DEAD_KEPT)  # stopped/failed: queued text is dropped
        self._kept = KeptAudio(keep, keep_s)
        self._spoken: BoundedDict[str, SpokenLog] = BoundedDict(keep)  # the last `keep` replies' segments
        self._replay_gen = 0
        self._closed = False
        self._thread: threading.Thread | None = None
        if self.available:
            self._thread = threading.Thread(target=self._relay, name="voice-relay", daemon=True)
            self._thread.start()

    @classmethod
    def create(cls, settings: Settings, sink: AudioSink | None = None, **kwargs: Any) -> Voice:
        """The voice the settings ask for: the speaker (or `sink`) and the TTS engine, built on
        first use. No sound output: an unavailable Voice whose `reason` is the plain message."""
        from desktop.media.audio_out import AudioUnavailable, SpeakerOutput
        from desktop.model.tts import make_tts

        owns = sink is None
        if sink is None:
            try:  # finds the device now; its stream opens on first use (see _ensure_pipeline)
                sink = SpeakerOutput(settings.audio_output_device, volume=settings.volume)
            except AudioUnavailable as exc:
                return cls.unavailable(exc.message)
        engine = (settings.tts_engine, settings.tts_voice)
        return cls(lambda: make_tts(*engine), sink, owns_sink=owns, engine=engine, **kwargs)

    @classmethod
    def unavailable(cls, reason: str) -> Voice:
        return cls(None, None, reason=reason)

    # ------------------------------------------------------------------ listeners and state

    def add_listener(self, listener: Callable[[VoiceEvent], None]) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[VoiceEvent], None]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    @property
    def sink(self) -> AudioSink | None:
        """Where the voice plays (the speaker): a call taps it for its echo canceller's far end."""
        return self._sink

    @property
    def speaking(self) -> bool:
        """Whether anything is being spoken or replayed (or waits to be)."""
        return bool(self._plays)

    # ------------------------------------------------------------------ speaking

    def prepare(self) -> None:
        """Load the TTS engine now (in the background) so that the first reply starts sooner."""
        if self.available and not self._closed:
            self._commands.put(("load", None))

    def speak_begin(self, request_id: str) -> None:
        if not self.available or self._closed:
            return
        with self._lock:
            if request_id in self._dead:  # stopped already
                return
            self._plays[request_id] = Play(request_id)
        self._commands.put(("begin", request_id))

    def speak_delta(self, request_id: str, text: str) -> None:
        if self.available and text and not self._closed:
            self._commands.put(("delta", request_id, text))

    def speak_end(self, request_id: str) -> None:
        if self.available and not self._closed:
            self._commands.put(("end", request_id))

    def stop(self, request_id: str | None = None) -> None:
        """Silence a reply (its replays too), or everything with None, within one audio block;
        its text still queued is dropped. Each reply stopped gets FINISHED(stopped=True)."""
        if not self.available:
            return
        with self._lock:
            self._replay_gen += 1
            sids = [s for s, p in self._plays.items() if request_id is None or p.request_id == request_id]
            plays = [self._plays.pop(s) for s in sids]
            rids = {p.request_id for p in plays if not p.replay} | ({request_id} if request_id else set())
            for rid in rids:
                self._mark_dead(rid)
            pipeline = self._pipeline
        for rid in rids:
            if pipeline is not None:
                pipeline.cancel(rid)  # drops its queued text and segments; flushes its audio
        for sid in sids:
            self._sink.flush(sid)
        if request_id is None:
            self._sink.flush(None)
        for p in plays:
            self._emit(VoiceEvent(VoiceEventKind.FINISHED, p.request_id, replay=p.replay, stopped=True))

    def heard(self, request_id: str) -> str:
        """The text of what the speaker has played of a reply (frozen when it is stopped): after a
        barge-in, what the user actually heard. A sink that cannot tell: all that was spoken."""
        with self._lock:
            spoken = self._spoken.get(request_id)
            if spoken is None:
                return ""
            heard_s = getattr(self._sink, "heard_s", None)
            return spoken.spoken_text if heard_s is None else spoken.heard_text(heard_s(request_id))

    def first_audio_at(self, request_id: str) -> float | None:
        """Clock time the reply's first sample reached the speaker, where the sink can tell."""
        first = getattr(self._sink, "first_audio_at", None)
        return first(request_id) if first is not None else None

    def audio_of(self, request_id: str) -> tuple[np.ndarray, int] | None:
        """The audio spoken for a reply so far (float32 mono, its rate); None when there is none
        (never spoken, or one of the oldest and no longer kept)."""
        return self._kept.get(request_id)

    def replay(self, request_id: str) -> bool:
        """Stop whatever plays and play a reply's kept audio again; False when there is none."""
        audio = self.audio_of(request_id) if self.available and not self._closed else None
        if audio is None:
            return False
        self.stop()
        with self._lock:
            gen = self._replay_gen
            sid = f"{request_id}#replay{gen}"  # a fresh sink id: the reply's own was flushed or ended
            self._plays[sid] = Play(request_id, replay=True)
        self._commands.put(("replay", request_id, sid, gen, *audio))
        return True

    # ------------------------------------------------------------------ settings and closing

    def set_volume(self, volume: float) -> None:
        if self.available and hasattr(self._sink, "volume"):
            self._sink.volume = volume  # type: ignore[union-attr]

    def update(self, settings: Settings) -> None:
        """Apply the volume now, and a new engine or voice from the next reply on. A new output
        device needs a new Voice (`close()` this one, `Voice.create` another)."""
        if not self.available:
            return
        self.set_volume(settings.volume)
        engine = (settings.tts_engine, settings.tts_voice)
        if engine != self._engine:
            from desktop.model.tts import make_tts

            self.stop()
            self._engine, self._factory = engine, (lambda: make_tts(*engine))
            self._commands.put(("reload", None))

    def close(self) -> None:
        """Silence, stop the threads and release the speaker (if this voice opened it)."""
        if not self.available or self._closed:
            return
        self.stop()
        with self._lock:
            self._closed = True
            pipeline, self._pipeline = self._pipeline, None
        self._commands.put(("close", None))
        if pipeline is not None:
            pipeline.close()  # a feed blocked at the high-water mark returns
        if self._owns_sink and hasattr(self._sink, "close"):
            self._sink.close()  # type: ignore[union-attr]
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=3.0)

    # ------------------------------------------------------------------ relay thread

    def _relay(self) -> None:
        while not self._closed:
            try:
                cmd = self._commands.get(timeout=_POLL_S)
            except queue.Empty:
                cmd = None
            if cmd is not None and not self._closed:
                try:
                    self._do(*cmd)
                except Exception as exc:  # a bug here must not end the relay
                    log.exception("voice command %s failed", cmd[0])
                    if cmd[1] is not None:
                        self._fail(cmd[1], f"The voice failed ({type(exc).__name__}: {exc}).")
            self._check_finished()

    def _do(self, op: str, rid: str | None, *args: Any) -> None:
        if op == "load":
            self._ensure_pipeline(None)
        elif op == "reload":
            with self._lock:
                pipeline, self._pipeline = self._pipeline, None
            if pipeline is not None:
                pipeline.close()
        elif op == "replay":
            self._play_back(rid, *args)
        elif rid is not None and not self._is_dead(rid) and (pipeline := self._ensure_pipeline(rid)):
            if op == "delta":
                pipeline.feed(rid, args[0])  # may wait at the pipeline's high-water mark
            elif op == "end":
                pipeline.end(rid)

    def _ensure_pipeline(self, rid: str | None) -> Pipeline | None:
        if self._pipeline is not None:
            return self._pipeline
        self._emit(VoiceEvent(VoiceEventKind.LOADING, rid, LOADING_MESSAGE))
        try:
            if self._owns_sink and hasattr(self._sink, "start"):
                self._sink.start()  # the speaker's stream: opened once, when first needed
            tts = self._factory()  # Piper: ~2 s, which is why this runs here
        except Exception as exc:  # TTSError, AudioUnavailable, or whatever a broken engine raises
            message = exc.message if isinstance(exc, OmnideskError) else f"{type(exc).__name__}: {exc}"
            log.warning("the voice could not be loaded: %s", message)
            if rid is not None:
                self._fail(rid, message)
            else:
                self._emit(VoiceEvent(VoiceEventKind.FAILED, None, message))
            return None
        pipeline = Pipeline(tts, self._sink, self._config, clock=self._clock, on_event=self._on_pipeline)
        pipeline.start()
        with self._lock:
            if self._closed:
                pipeline.close()
                return None
            self._pipeline = pipeline
        self._emit(VoiceEvent(VoiceEventKind.READY))
        return pipeline

    def _play_back(self, rid: str, sid: str, gen: int, samples: np.ndarray, rate: int) -> None:
        with self._lock:
            play = self._plays.get(sid)
            if play is None or gen != self._replay_gen:
                return
            play.started = True
        self._emit(VoiceEvent(VoiceEventKind.STARTED, rid, replay=True))
        step = max(1, int(rate * _REPLAY_CHUNK_S))
        for i in range(0, len(samples), step):
            if gen != self._replay_gen or self._closed:
                return
            piece = samples[i:i + step]
            self._sink.write(sid, piece, rate)  # blocks at high water; a stop flushes and frees it
            play.seconds += len(piece) / rate
        self._sink.end(sid)
        with self._lock:
            if self._plays.get(sid) is play:
                play.done_at = self._clock.now()

    def _check_finished(self) -> None:
        """Report replies whose audio has all been heard (or should have been by now)."""
        now, done = self._clock.now(), []
        queued_s = getattr(self._sink, "queued_s", None)  # a sink that cannot tell: done when written
        with self._lock:
            for sid, play in list(self._plays.items()):
                if play.done_at is None:
                    continue
                played_out = queued_s is None or queued_s(sid) <= 0
                if played_out or now >= play.done_at + play.seconds + _FINISH_SLACK_S:
                    del self._plays[sid]
                    done.append(play)
        for play in done:
            self._emit(VoiceEvent(VoiceEventKind.FINISHED, play.request_id, replay=play.replay))

    # ------------------------------------------------------------------ pipeline events (stage threads)

    def _on_pipeline(self, event: object) -> None:
        if isinstance(event, Segment):
            if event.text:
                with self._lock:
                    self._spoken_log(event.request_id).add_segment(event.sequence, event.text)
        elif isinstance(event, AudioChunk):
            if event.is_last or not event.samples.size:
                return
            with self._lock:
                play = self._plays.get(event.request_id)
                if play is None:  # stopped
                    return
                self._kept.add(event.request_id, event.samples, event.sample_rate)
                self._spoken_log(event.request_id).add_audio(event.segment, event.samples.size, event.sample_rate)
                play.seconds += event.samples.size / event.sample_rate
                first, play.started = not play.started, True
            if first:
                self._emit(VoiceEvent(VoiceEventKind.STARTED, event.request_id))
        elif isinstance(event, PipelineDone):
            with self._lock:
                play = self._plays.get(event.request_id)
                if play is not None and not event.stats.get("cancelled"):
                    play.done_at = self._clock.now()
        elif isinstance(event, PipelineError):
            self._fail(event.request_id, event.message)

    def _spoken_log(self, rid: str) -> SpokenLog:  # lock held
        spoken = self._spoken.get(rid)
        if spoken is None:
            spoken = self._spoken[rid] = SpokenLog()
        return spoken

    def _fail(self, rid: str, message: str) -> None:
        with self._lock:
            self._mark_dead(rid)
            play = self._plays.pop(rid, None)
        if play is not None:
            self._emit(VoiceEvent(VoiceEventKind.FAILED, rid, message))

    def _is_dead(self, rid: str) -> bool:
        with self._lock:
            return rid in self._dead

    def _mark_dead(self, rid: str) -> None:  # lock held
        self._dead[rid] = None

    def _emit(self, event: VoiceEvent) -> None:
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:  # a broken listener must not stop the voice
                log.exception("voice listener failed for %r", event)
