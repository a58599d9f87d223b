"""The output pipeline: LLM text → segmenter thread → TTS thread → audio sink, over bounded queues,
in order per (request_id, sequence), with backpressure at a high-water mark and prompt cancel."""

from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass
from enum import Enum
from typing import Callable

import numpy as np

from desktop.speech.finished import FinishedReplies, Over
from desktop.speech.pacing import Pacing
from desktop.speech.segmenter import Segmenter, SegmenterConfig
from desktop.speech.speech_types import AudioChunk, PipelineDone, PipelineError, Segment, TextDelta, TTSEngine
from desktop.media.audio_out import AudioSink
from desktop.media.clock import Clock, RealClock

__all__ = ["AudioChunk", "AudioSink", "Pipeline", "PipelineDone", "PipelineError", "Segment",
           "SegmenterConfig", "TTSEngine", "TextDelta"]

log = logging.getLogger(__name__)
_POLL_S = 0.02  # real-time granularity of the stages' waits (flush timer, cancel/close checks)


class ReqState(Enum):
    OPEN = "open"
    ENDED = "ended"  # is_last fed; stages still working on it
    DONE = "done"
    CANCELLED = "cancelled"
    FAILED = "failed"


_LIVE = (ReqState.OPEN, ReqState.ENDED)


@dataclass(slots=True, eq=False)
class _Req:
    """One request's state; counters are each written by one stage only."""

    request_id: str
    started_at: float
    state: ReqState = ReqState.OPEN
    next_delta: int = 0  # caller side
    segmenter: Segmenter | None = None  # segmenter thread
    next_segment: int = 0
    all_cut: bool = False  # every segment, the is_last one too, is in the speech queue (or spoken)
    first_segment_at: float | None = None
    segments: int = 0  # non-empty ones
    chars: int = 0
    next_chunk: int = 0  # TTS thread
    first_synth_ms: float | None = None
    first_audio_at: float | None = None
    synth_s: float = 0.0
    samples: int = 0
    sample_rate: int = 0
    feed_waits: int = 0

    def stats(self, now: float) -> dict:
        return {"started_at": self.started_at, "first_segment_at": self.first_segment_at,
                "first_synth_ms": self.first_synth_ms, "first_audio_at": self.first_audio_at,
                "ended_at": now, "segments": self.segments, "chars": self.chars,
                "audio_s": self.samples / self.sample_rate if self.sample_rate else 0.0,
                "synth_ms": self.synth_s * 1000, "feed_waits": self.feed_waits,
                "cancelled": self.state is ReqState.CANCELLED}


class _Lane(queue.Queue):
    """A bounded FIFO between two stages whose queued items of one request can be discarded."""

    def discard(self, request_id: str) -> int:
        with self.mutex:
            kept = [item for item in self.queue if item.request_id != request_id]
            dropped = len(self.queue) - len(kept)
            if dropped:
                self.queue.clear()
                self.queue.extend(kept)
                self.not_full.notify_all()
            return dropped

    def first(self, request_id: str) -> object | None:
        """The request's first queued item, if any."""
        with self.mutex:
            return next((item for item in self.queue if item.request_id == request_id), None)


class Pipeline:
    """Two stage threads: the segmenter (TextDelta → Segment) and the TTS (Segment → audio →
    `sink.write`), joined by bounded queues of `high_water` items, one FIFO each, so every request's
    events stay in order. Text is must-deliver: `feed`/`end` block while the text queue is full
    (never drop), so a slow sink slows the TTS, then the segmenter, then the caller. `on_event`
    gets Segment, AudioChunk, PipelineError and PipelineDone from the stage threads (keep it
    quick); every request that got text ends with exactly one PipelineDone or PipelineError.
    `finished`: where requests that are done, cancelled or failed are marked, so that late text
    for them is dropped (the Voice's registry; by default one of its own)."""

    def __init__(self, tts: TTSEngine, sink: AudioSink, config: SegmenterConfig = SegmenterConfig(), *,
                 clock: Clock = RealClock(), high_water: int = 8,
                 on_event: Callable[[object], None] = lambda e: None,
                 finished: FinishedReplies | None = None) -> None:
        if high_water < 1:
            raise ValueError(f"high_water must be at least 1, not {high_water}")
        self._tts, self._sink, self._config, self._clock, self._on_event = tts, sink, config, clock, on_event
        self._text, self._speech = _Lane(high_water), _Lane(high_water)
        self._lock = threading.Lock()  # request table and states
        self._feed_lock = threading.Lock()  # a delta's sequence number and its place in the queue
        self._reqs: dict[str, _Req] = {}
        self._finished = finished if finished is not None else FinishedReplies()
        self._closed = threading.Event()
        self._threads = [threading.Thread(target=self._segment_loop, name="pipeline-segmenter", daemon=True),
                         threading.Thread(target=self._speak_loop, name="pipeline-tts", daemon=True)]
        self._pacing = Pacing()  # the TTS thread's
        self._started = False
        self.feed_waits = 0  # how many times a feed/end had to wait at the high-water mark

    # ------------------------------------------------------------------ caller side

    def start(self) -> None:
        self._started = True
        for t in self._threads:
            t.start()

    def close(self, timeout: float = 2.0) -> None:
        """Stop both stages; unfinished requests are abandoned (no further events)."""
        self._closed.set()
        for t in self._threads:
            if t.is_alive():
                t.join(timeout)

    def __enter__(self) -> Pipeline:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def feed(self, request_id: str, text_delta: str) -> None:
        """Text from the LLM stream (any thread). Never dropped while the request is live; blocks
        while the text queue is at its high-water mark. Text for a cancelled or failed request is
        ignored."""
        if text_delta:
            self._put_delta(request_id, text_delta, False)

    def end(self, request_id: str) -> None:
        """The reply is complete (is_last): the rest is spoken, then PipelineDone."""
        self._put_delta(request_id, "", True)

    def cancel(self, request_id: str) -> None:
        """Stop every stage's work for the request and flush its queued audio (also once it is
        done: the speaker may still be playing it); never blocks on the stages. A live request
        gets PipelineDone with stats["cancelled"] = True; later text for it is ignored."""
        with self._lock:
            req = self._reqs.get(request_id)
            live = req is not None and req.state in _LIVE
            if live:
                req.state = ReqState.CANCELLED
            if live or not self._gone(request_id):  # not seen yet: cancelled before its first text
                self._retire(request_id, ReqState.CANCELLED)
        self._text.discard(request_id)
        self._speech.discard(request_id)
        self._sink.flush(request_id)
        if live:
            self._emit(PipelineDone(request_id, req.stats(self._clock.now())))

    def metrics(self) -> dict:
        """Queue depths and backpressure counts, for the admin panel and /metrics."""
        with self._lock:
            active = len(self._reqs)
        return {"text_depth": self._text.qsize(), "speech_depth": self._speech.qsize(),
                "active": active, "feed_waits": self.feed_waits}

    def _put_delta(self, request_id: str, text: str, is_last: bool) -> None:
        if not self._started:
            raise RuntimeError("Pipeline.start() must be called before feeding it")
        with self._feed_lock:
            with self._lock:
                req = self._reqs.get(request_id)
                if req is None:
                    if self._gone(request_id) or self._closed.is_set():
                        return  # late text for a finished, cancelled or failed request
                    req = self._reqs[request_id] = _Req(request_id, self._clock.now())
                if req.state is not ReqState.OPEN:
                    return
                delta = TextDelta(request_id, req.next_delta, text, is_last)
                req.next_delta += 1
                if is_last:
                    req.state = ReqState.ENDED
            self._put(self._text, delta, req)

    def _put(self, lane: _Lane, item: TextDelta | Segment, req: _Req) -> None:
        """Blocking put that gives up only when the request stops being live or on close."""
        if lane is self._text and lane.full():
            req.feed_waits += 1
            self.feed_waits += 1
        while self._live(req):
            try:
                return lane.put(item, timeout=_POLL_S)
            except queue.Full:
                pass

    def _retire(self, request_id: str, state: ReqState) -> None:
        """Drop the request from the table (caller holds the lock); late text for it is ignored."""
        self._reqs.pop(request_id, None)
        self._finished.mark(request_id, Over.DONE if state is ReqState.DONE else Over.SILENCED)

    def _gone(self, request_id: str) -> bool:
        """Done, cancelled or failed (here, or silenced by the Voice): its text is late."""
        return self._finished.at_least(request_id, Over.DONE)

    def _emit(self, event: object) -> None:
        try:
            self._on_event(event)
        except Exception:  # a broken listener must not stop the stages
            log.exception("pipeline on_event failed for %r", event)

    def _live(self, req: _Req) -> bool:
        return req.state in _LIVE and not self._closed.is_set()

    # ------------------------------------------------------------------ segmenter stage

    def _segment_loop(self) -> None:
        active: dict[str, _Req] = {}  # requests with pending text (for the flush timer)
        while not self._closed.is_set():
            now = self._clock.now()
            deadlines = [d for r in active.values() if (d := r.segmenter.deadline()) is not None]
            timeout = min(_POLL_S, max(0.001, min(deadlines) - now)) if deadlines else _POLL_S
            try:
                delta = self._text.get(timeout=timeout)
            except queue.Empty:
                delta = None
            now = self._clock.now()
            if delta is not None and (req := self._reqs.get(delta.request_id)) is not None:
                self._guarded(req, self._segment_delta, req, delta, now, active)
            for rid, req in list(active.items()):
                if not self._live(req):
                    del active[rid]
                elif (d := req.segmenter.deadline()) is not None and d <= now:
                    self._guarded(req, lambda r: self._send(r, r.segmenter.poll(now), now, False), req)

    def _segment_delta(self, req: _Req, delta: TextDelta, now: float, active: dict[str, _Req]) -> None:
        if not self._live(req):
            return
        if req.segmenter is None:
            req.segmenter = Segmenter(self._config, req.started_at)  # the timer runs from the first text
            active[req.request_id] = req
        pieces = req.segmenter.push(delta.text, now)
        if delta.is_last:
            active.pop(req.request_id, None)
            pieces += req.segmenter.finish()
        self._send(req, pieces, now, delta.is_last)

    def _send(self, req: _Req, pieces: list[str], now: float, last: bool) -> None:
        for i, text in enumerate(pieces):
            if not self._live(req):
                return
            seg = Segment(req.request_id, req.next_segment, text, last and i == len(pieces) - 1, now)
            req.next_segment += 1
            req.chars += len(text)
            req.segments += bool(text)
            if req.first_segment_at is None and text:
                req.first_segment_at = now
            self._emit(seg)
            self._put(self._speech, seg, req)
        if last:
            req.all_cut = True

    # ------------------------------------------------------------------ TTS stage

    def _speak_loop(self) -> None:
        while not self._closed.is_set():
            try:
                seg = self._speech.get(timeout=_POLL_S)
            except queue.Empty:
                continue
            if (req := self._reqs.get(seg.request_id)) is not None:
                self._guarded(req, self._speak, req, seg)

    def _speak(self, req: _Req, seg: Segment) -> None:
        if not self._live(req):
            return
        try:
            self._synthesize(req, seg)
        except Exception as exc:
            log.warning("TTS failed for %s: %r", req.request_id, exc)
            self._fail(req, "tts_failed", f"Speech synthesis failed ({type(exc).__name__}: {exc}); "
                                          "the text reply is not affected.")
        if seg.is_last:
            with self._lock:
                if not self._live(req):
                    return
                req.state = ReqState.DONE
                self._retire(req.request_id, ReqState.DONE)
            self._sink.end(req.request_id)
            sr = self._tts.sample_rate
            self._emit(AudioChunk(req.request_id, req.next_chunk, np.zeros(0, np.float32), sr, True))
            self._emit(PipelineDone(req.request_id, req.stats(self._clock.now())))

    def _synthesize(self, req: _Req, seg: Segment) -> None:
        """Synthesize and write chunk by chunk; a cancel is seen between chunks. Before each write
        the sink hears how fast the chunk was made and what should come next (`AudioSink.pace`)."""
        if not seg.text:
            return
        t0 = self._clock.now()
        chunks = iter(self._tts.synthesize(seg.text))
        sr, made = self._tts.sample_rate, 0
        try:
            while self._live(req):
                t = self._clock.now()
                samples = next(chunks, None)
                took = self._clock.now() - t
                req.synth_s += took
                if samples is None or not self._live(req):
                    return
                samples = np.asarray(samples, dtype=np.float32).reshape(-1)
                if samples.size:
                    if req.first_synth_ms is None:
                        req.first_synth_ms = (self._clock.now() - t0) * 1000
                    made += samples.size
                    self._sink.pace(req.request_id, samples.size / sr, took,
                                    self._pacing.seconds(self._next_text(req)))
                    self._write(req, samples, seg.sequence)
        finally:
            getattr(chunks, "close", lambda: None)()
            if made:
                self._pacing.spoken(seg.text, made / sr)

    def _next_text(self, req: _Req) -> str | None:
        """The text of the request's next segment, if it is known: the one queued for the TTS,
        or "" when all of it has been cut and nothing is queued; None while it is being written."""
        queued = self._speech.first(req.request_id)
        if queued is not None:
            return queued.text
        return "" if req.all_cut else None

    def _write(self, req: _Req, samples: np.ndarray, segment: int) -> None:
        rid, sr = req.request_id, self._tts.sample_rate
        with self._lock:
            if not self._live(req):
                return
            seq, req.next_chunk = req.next_chunk, req.next_chunk + 1
        if req.first_audio_at is None:
            req.first_audio_at = self._clock.now()
        try:
            self._sink.write(rid, samples, sr)
        except Exception as exc:
            log.warning("audio sink failed for %s: %r", rid, exc)
            return self._fail(req, "audio_failed", f"Audio output failed ({type(exc).__name__}: {exc}).")
        if req.state is ReqState.CANCELLED:
            self._sink.flush(rid)  # cancelled while this write was in flight: drop what it queued
            return
        req.samples += samples.size
        req.sample_rate = sr
        self._emit(AudioChunk(rid, seq, samples, sr, False, segment))

    def _fail(self, req: _Req, code: str, message: str) -> None:
        with self._lock:
            if not self._live(req):
                return
            req.state = ReqState.FAILED
            self._retire(req.request_id, ReqState.FAILED)
        self._text.discard(req.request_id)
        self._speech.discard(req.request_id)
        self._sink.end(req.request_id)  # what was already queued plays out
        self._emit(PipelineError(req.request_id, code, message))

    def _guarded(self, req: _Req, fn: Callable[..., None], *args: object) -> None:
        try:
            fn(*args)
        except Exception as exc:  # a bug in a stage ends that request, not the stage
            log.exception("pipeline stage failed for %s", req.request_id)
            self._fail(req, "pipeline_failed", f"The speech pipeline failed ({type(exc).__name__}: {exc}).")
