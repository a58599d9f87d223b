"""The Voice's output pipeline, built when first needed on the relay thread: the speaker's stream
opens (when the Voice opened the speaker) and the TTS engine loads (Piper: ~2 s); a new engine
drops it so that the next reply loads that one."""

from __future__ import annotations

import logging
import threading
from typing import Callable

from desktop.errors import OmnideskError
from desktop.media.audio_out import AudioSink
from desktop.media.clock import Clock
from desktop.speech.finished import FinishedReplies
from desktop.speech.pipeline import Pipeline, SegmenterConfig
from desktop.speech.speech_types import TTSEngine
from desktop.speech.voice_audio import VoiceEvent, VoiceEventKind

log = logging.getLogger(__name__)
LOADING_MESSAGE = "Loading voice…"


class PipelineLoader:
    """`get(rid)` gives the pipeline, building it first if there is none: LOADING, then READY, or
    on failure FAILED (`fail(rid, message)` for a reply's, an event for a `prepare`). `factory`
    makes the TTS engine; `open_sink`: start the sink first (the Voice opened it). Thread-safe
    against `reload` and `close` from other threads."""

    def __init__(self, factory: Callable[[], TTSEngine], sink: AudioSink, *, config: SegmenterConfig,
                 clock: Clock, finished: FinishedReplies, on_event: Callable[[object], None], open_sink: bool,
                 emit: Callable[[VoiceEvent], None], fail: Callable[[str, str], None]) -> None:  # fmt: skip
        self.factory, self._sink, self._config, self._clock = factory, sink, config, clock
        self._finished, self._on_event, self._open_sink = finished, on_event, open_sink
        self._emit, self._fail = emit, fail
        self._lock = threading.Lock()
        self._pipeline: Pipeline | None = None
        self._closed = False

    @property
    def pipeline(self) -> Pipeline | None:
        """The pipeline if it is built (never builds it)."""
        return self._pipeline

    def get(self, rid: str | None) -> Pipeline | None:
        if self._pipeline is not None:
            return self._pipeline
        self._emit(VoiceEvent(VoiceEventKind.LOADING, rid, LOADING_MESSAGE))
        try:
            if self._open_sink:
                self._sink.start()  # the speaker's stream: opened once, when first needed
            tts = self.factory()  # Piper: ~2 s, which is why this runs on the relay
        except Exception as exc:  # TTSError, AudioUnavailable, or whatever a broken engine raises
            message = exc.message if isinstance(exc, OmnideskError) else f"{type(exc).__name__}: {exc}"
            log.warning("the voice could not be loaded: %s", message)
            if rid is not None:
                self._fail(rid, message)
            else:
                self._emit(VoiceEvent(VoiceEventKind.FAILED, None, message))
            return None
        pipeline = Pipeline(tts, self._sink, self._config, clock=self._clock, on_event=self._on_event,
                            finished=self._finished)  # fmt: skip
        pipeline.start()
        with self._lock:
            if self._closed:
                pipeline.close()
                return None
            self._pipeline = pipeline
        self._emit(VoiceEvent(VoiceEventKind.READY))
        return pipeline

    def reload(self) -> None:
        """Drop the pipeline: the next `get` builds one with the (new) factory."""
        with self._lock:
            pipeline, self._pipeline = self._pipeline, None
        if pipeline is not None:
            pipeline.close()

    def close(self) -> None:
        """Drop the pipeline for good (a feed blocked at its high-water mark returns)."""
        with self._lock:
            self._closed = True
        self.reload()
