"""Spoken replies without Qt: loads the TTS lazily, relays streamed text to the output pipeline from
its own thread, keeps each reply's audio for Replay and reports speaking started/finished/failed.
The only owner of the speaker: its volume, ducking, taps and counters are asked of the Voice."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from desktop.speech.finished import FinishedReplies, Over
from desktop.speech.heard import SpokenLogs
from desktop.speech.loader import LOADING_MESSAGE, PipelineLoader  # noqa: F401 (LOADING_MESSAGE: for tests)
from desktop.speech.pipeline import AudioChunk, PipelineDone, PipelineError, Segment, SegmenterConfig
from desktop.speech.playback import Playback, PlaybackStats, lent
from desktop.speech.plays import Plays
from desktop.speech.relay import Begin, Close, Command, Delta, End, ForReply, Load, Relay, Reload, Replay
from desktop.speech.speech_types import TTSEngine
from desktop.speech.voice_audio import KEEP_REPLIES, KEEP_SECONDS, KeptAudio, VoiceEvent, VoiceEventKind
from desktop.media.audio_out import AudioOut, AudioSink, Tap
from desktop.media.clock import Clock, RealClock

if TYPE_CHECKING:
    from desktop.settings import Settings

log = logging.getLogger(__name__)
_REPLAY_CHUNK_S = 0.25  # replay is written in pieces this long, so that a stop is seen quickly


class Voice:
    """Speaks streamed replies: `speak_begin(rid)`, `speak_delta(rid, text)` as text arrives (never
    blocks: a relay thread feeds the pipeline), `speak_end(rid)`. `stop()` silences at once.
    Events go to the listeners on the voice's own threads: hop to the UI thread there. Request ids
    are not reused. `available` is False (with `reason`) when there is no sound output; then every
    call is a no-op. The voice is the speaker's only owner: its volume, ducking, taps on what it
    played, what was heard of a reply and its counters are asked of the voice, never the sink."""

    def __init__(self, tts_factory: Callable[[], TTSEngine] | None, sink: AudioSink | None, *,
                 config: SegmenterConfig = SegmenterConfig(), clock: Clock = RealClock(),
                 keep: int = KEEP_REPLIES, keep_s: float = KEEP_SECONDS, owns_sink: bool = False,
                 engine: tuple[str, str | None] | None = None, reason: str | None = None) -> None:
        self.available = sink is not None and tts_factory is not None
        self.reason = None if self.available else (reason or "Audio is off")
        self._sink, self._clock, self._owns_sink = sink, clock, owns_sink
        # the engine and voice of the Settings, a preset's choice over them (`use`), and the one loaded
        self._settings_engine, self._chosen = engine, (None, None, 1.0)
        self._engine = (*engine, 1.0) if engine is not None else None
        self._out = Playback(sink)
        self.finished = FinishedReplies()  # the one registry of replies that are over (ReplyVoice's too)
        self._listeners: list[Callable[[VoiceEvent], None]] = []
        self._loader: PipelineLoader | None = None
        if tts_factory is not None and sink is not None:
            self._loader = PipelineLoader(tts_factory, sink, config=config, clock=clock, finished=self.finished,
                                          on_event=self._on_pipeline, open_sink=owns_sink, emit=self._emit,
                                          fail=self._fail)  # fmt: skip
        self._plays = Plays(self.finished)  # what is being spoken, by sink id
        self._kept = KeptAudio(keep, keep_s)
        self._spoken = SpokenLogs(keep)  # the last `keep` replies' segments
        self._closed = False
        self._relay = Relay(self._do, self._check_finished, self._failed)
        if self.available:
            self._relay.start()

    @classmethod
    def create(cls, settings: Settings, sink: AudioSink | None = None, **kwargs: Any) -> Voice:
        """The voice the settings ask for: the speaker (or `sink`) and the TTS engine, built on
        first use. No sound output: an unavailable Voice whose `reason` is the plain message."""
        from desktop.media.audio_out import AudioUnavailable, SpeakerOutput
        from desktop.model.tts import make_tts

        owns = sink is None
        if sink is None:
            try:  # finds the device now; its stream opens on first use (see speech/loader.py)
                sink = SpeakerOutput(settings.audio_output_device, volume=settings.volume)
            except AudioUnavailable as exc:
                return cls.unavailable(exc.message)
        engine = (settings.tts_engine, settings.tts_voice)
        return cls(lambda: make_tts(*engine), sink, owns_sink=owns, engine=engine, **kwargs)

    def use(self, engine: str | None, voice: str | None = None, rate: float = 1.0) -> None:
        """Speak the next replies with this engine, voice and rate (a preset's: `Preset.speech()`);
        engine None: the Settings' engine and voice. A change stops what is playing and loads the
        engine anew for the next reply; the same choice again costs nothing."""
        self._chosen = (engine, voice, rate)
        self._follow()

    @property
    def speech(self) -> tuple[str, str | None, float] | None:
        """(engine, voice, rate) the next replies are spoken with (None: not known to this voice)."""
        return self._engine

    @classmethod
    def unavailable(cls, reason: str) -> Voice:
        return cls(None, None, reason=reason)

    # ------------------------------------------------------------------ listeners and state

    def add_listener(self, listener: Callable[[VoiceEvent], None]) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[VoiceEvent], None]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def lend(self) -> AudioOut | None:
        """The speaker for the recordings player: play its own audio, nothing more (None: no speaker)."""
        return lent(self._sink)

    @property
    def loaded(self) -> bool:
        """Whether the TTS engine is loaded (prepare() loads it in the background)."""
        return self._loader is not None and self._loader.pipeline is not None

    @property
    def speaking(self) -> bool:
        """Whether anything is being spoken or replayed (or waits to be)."""
        return bool(self._plays)

    # ------------------------------------------------------------------ speaking

    def prepare(self) -> None:
        """Load the TTS engine now (in the background) so that the first reply starts sooner."""
        if self.available and not self._closed:
            self._relay.put(Load())

    def speak_begin(self, request_id: str) -> None:
        if self.available and not self._closed and self._plays.begin(request_id):  # not stopped already
            self._relay.put(Begin(request_id))

    def speak_delta(self, request_id: str, text: str) -> None:
        if self.available and text and not self._closed:
            self._relay.put(Delta(request_id, text))

    def speak_end(self, request_id: str) -> None:
        if self.available and not self._closed:
            self._relay.put(End(request_id))

    def stop(self, request_id: str | None = None) -> None:
        """Silence a reply (its replays too), or everything with None, within one audio block;
        its text still queued is dropped. Each reply stopped gets FINISHED(stopped=True)."""
        if not self.available:
            return
        sids, plays, rids = self._plays.stop(request_id)
        pipeline = self._loader.pipeline if self._loader is not None else None
        for rid in rids:
            if pipeline is not None:
                pipeline.cancel(rid)  # drops its queued text and segments; flushes its audio
        for sid in sids:
            self._sink.flush(sid)
        if request_id is None:
            self._sink.flush(None)
        for p in plays:
            self._emit(VoiceEvent(VoiceEventKind.FINISHED, p.request_id, replay=p.replay, stopped=True))

    # ------------------------------------------------------------------ what the speaker played

    def heard(self, request_id: str) -> str:
        """The text of what the speaker has played of a reply (frozen when it is stopped): after a
        barge-in, what the user actually heard."""
        return self._spoken.heard_text(request_id, self._out.heard_s(request_id))

    def heard_s(self, request_id: str) -> float:
        """Seconds of a reply the speaker has played (frozen when it is stopped)."""
        return self._out.heard_s(request_id)

    def first_audio_at(self, request_id: str) -> float | None:
        """Clock time the reply's first sample reached the speaker, if it has."""
        return self._out.first_audio_at(request_id)

    def playback_stats(self) -> PlaybackStats | None:
        """The speaker's counters (underruns, starved seconds, …); None with no sound output."""
        return self._out.stats()

    @property
    def device_rate(self) -> int:
        """The speaker's sample rate, for a tap (0 with no sound output)."""
        return self._out.device_rate

    @property
    def block_frames(self) -> int:
        return self._out.block_frames

    def tap(self, fn: Tap) -> Callable[[], None]:
        """Call fn(block, t) with every block the speaker plays from now on, on the audio thread
        (it must only copy: the echo canceller's far end, the recorder); returns the untap."""
        return self._out.tap(fn)

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
        self._relay.put(Replay(request_id, *self._plays.begin_replay(request_id), *audio))
        return True

    # ------------------------------------------------------------------ settings and closing

    def set_volume(self, volume: float) -> None:
        """The user's volume (while ducked: given back at `unduck`)."""
        self._out.set_volume(volume)

    def duck(self) -> None:
        """Silence the speaker at once, the reply playing on (the user may be talking over it)."""
        self._out.duck()

    def unduck(self) -> None:
        """The user's volume back."""
        self._out.unduck()

    def update(self, settings: Settings) -> None:
        """Apply the volume now, and a new engine or voice from the next reply on. A new output
        device needs a new Voice (`close()` this one, `Voice.create` another)."""
        if not self.available:
            return
        self.set_volume(settings.volume)
        self._settings_engine = (settings.tts_engine, settings.tts_voice)
        self._follow()

    def _follow(self) -> None:
        """Load the engine the choice and the Settings ask for, if it is not the one loaded."""
        engine, voice, rate = self._chosen
        if engine is None:
            if self._settings_engine is None:  # built on a bare factory: it stays
                return
            engine, voice = self._settings_engine
        want = (engine, voice, rate)
        if not self.available or want == self._engine:
            return
        from desktop.model.tts import make_tts

        self.stop()
        self._engine = want
        if self._loader is not None:
            self._loader.factory = lambda: make_tts(*want)
        self._relay.put(Reload())

    def close(self) -> None:
        """Silence, stop the threads and release the speaker (if this voice opened it)."""
        if not self.available or self._closed:
            return
        self.stop()
        self._closed = True
        self._relay.halt()
        if self._loader is not None:
            self._loader.close()  # a feed blocked at the high-water mark returns
        if self._owns_sink:
            self._sink.close()
        self._relay.join(timeout=3.0)

    # ------------------------------------------------------------------ relay thread

    def _do(self, cmd: Command) -> None:
        loader = self._loader
        if self._closed or loader is None or isinstance(cmd, Close):
            return
        if isinstance(cmd, Load):
            loader.get(None)
        elif isinstance(cmd, Reload):
            loader.reload()
        elif isinstance(cmd, Replay):
            self._play_back(cmd)
        elif not self.finished.at_least(cmd.request_id, Over.SILENCED) and (pipeline := loader.get(cmd.request_id)):
            if isinstance(cmd, Delta):
                pipeline.feed(cmd.request_id, cmd.text)  # may wait at the pipeline's high-water mark
            elif isinstance(cmd, End):
                pipeline.end(cmd.request_id)

    def _failed(self, cmd: Command, exc: Exception) -> None:
        if isinstance(cmd, ForReply):
            self._fail(cmd.request_id, f"The voice failed ({type(exc).__name__}: {exc}).")

    def _play_back(self, cmd: Replay) -> None:
        sid, gen, samples, rate = cmd.sink_id, cmd.gen, cmd.samples, cmd.rate
        play = self._plays.start_replay(sid, gen)
        if play is None:
            return
        self._emit(VoiceEvent(VoiceEventKind.STARTED, cmd.request_id, replay=True))
        step = max(1, int(rate * _REPLAY_CHUNK_S))
        for i in range(0, len(samples), step):
            if not self._plays.current(gen) or self._closed:
                return
            piece = samples[i:i + step]
            self._sink.write(sid, piece, rate)  # blocks at high water; a stop flushes and frees it
            play.seconds += len(piece) / rate
        self._sink.end(sid)
        self._plays.written(sid, self._clock.now(), play)

    def _check_finished(self) -> None:
        """Report replies whose audio has all been heard (or should have been by now)."""
        for play in self._plays.played_out(self._clock.now(), self._out.queued_s):
            self._emit(VoiceEvent(VoiceEventKind.FINISHED, play.request_id, replay=play.replay))

    # ------------------------------------------------------------------ pipeline events (stage threads)

    def _on_pipeline(self, event: object) -> None:
        if isinstance(event, Segment):
            if event.text:
                self._spoken.add_segment(event.request_id, event.sequence, event.text)
        elif isinstance(event, AudioChunk) and not event.is_last and event.samples.size:
            rid, samples, rate = event.request_id, event.samples, event.sample_rate

            def keep() -> None:  # what a stopped reply says after its stop is not kept
                self._kept.add(rid, samples, rate)
                self._spoken.add_audio(rid, event.segment, samples.size, rate)

            if self._plays.audio(rid, samples.size / rate, keep):  # its first audio
                self._emit(VoiceEvent(VoiceEventKind.STARTED, rid))
        elif isinstance(event, PipelineDone) and not event.stats.get("cancelled"):
            self._plays.written(event.request_id, self._clock.now())
        elif isinstance(event, PipelineError):
            self._fail(event.request_id, event.message)

    def _fail(self, rid: str, message: str) -> None:
        if self._plays.fail(rid) is not None:
            self._emit(VoiceEvent(VoiceEventKind.FAILED, rid, message))

    def _emit(self, event: VoiceEvent) -> None:
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:  # a broken listener must not stop the voice
                log.exception("voice listener failed for %r", event)
