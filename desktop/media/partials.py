"""Partial transcripts while the user talks: the utterance so far is re-transcribed on a background
thread (newest audio wins), and the final text reuses a pass that already covers every voiced
sample, started when the pause began, so the ASR time hides inside the end-of-turn silence."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from desktop.media.asr import Transcript
from desktop.media.frames import SAMPLE_RATE

log = logging.getLogger(__name__)


class Transcriber(Protocol):
    def transcribe(self, audio16k: np.ndarray) -> Transcript: ...


@dataclass(frozen=True, slots=True)
class Partial:
    """The text of the utterance's first `audio_s` seconds, after `ms` of compute."""

    text: str
    audio_s: float
    ms: float


class PartialTranscriber:
    """Fed the frames of one utterance (`feed`), with whether each is voiced (the VAD's say).
    A pass starts after every `interval_ms` of new voiced audio, and at once when a pause
    begins — that pass is the speculative final: if no more speech comes before the turn ends,
    `final()` returns its text without a new pass. Passes run on worker threads and never
    block `feed`; a request made while its lane is busy replaces any older waiting request.

    Two lanes when the ASR can run two passes at once (`asr.workers` ≥ 2, or `final_lane`):
    partial passes run on the first, the pause pass and `final()`'s own pass on the second, so
    the final never queues behind a partial pass still running when the pause begins (with one
    lane it waited for it: ≈ one pass more). `on_partial(Partial)` is called on a worker
    thread with each pass that is the newest so far (an older pass finishing late is not
    reported). `reset()` between utterances.

    Measured with bench/asr_final.py (2 cores shared with other work, tiny.en int8, 1 thread,
    the call script in espeak and Piper, turn end = last voiced sample + 265 ms): with
    Whisper's 30 s window and one lane, turn end → final text p50 1,140 ms (p95 2,379); with the
    window cut to the utterance and the final lane, p50 87 ms (p95 346), WER 0.047 → 0.031.
    `interval_ms` 700 keeps partials live (a new text about every 0.7 s of speech) while the
    CPU stays partly free."""

    def __init__(self, asr: Transcriber, *, interval_ms: float = 700, tail_ms: float = 200,
                 on_partial: Callable[[Partial], None] | None = None,
                 final_lane: bool | None = None) -> None:  # fmt: skip
        self.asr = asr
        self.interval = int(interval_ms * SAMPLE_RATE / 1000)
        self.tail = int(tail_ms * SAMPLE_RATE / 1000)  # silence kept after the last voiced sample
        self.on_partial = on_partial
        if final_lane is None:
            final_lane = getattr(asr, "workers", 1) >= 2
        self.lanes = 2 if final_lane else 1
        self._cond = threading.Condition()
        self._audio = np.zeros(30 * SAMPLE_RATE, np.float32)
        self._threads: list[threading.Thread | None] = [None] * self.lanes
        self._closed = False
        self._gen = 0
        self.reset()

    def reset(self) -> None:
        """Drop the utterance; a pass still running for it is ignored when it returns."""
        with self._cond:
            self._gen += 1
            self._n = 0  # samples fed
            self._voiced_end = 0  # sample index just after the last voiced sample
            self._was_voiced = False
            self._asked = 0  # audio length of the newest request
            self._fresh = 0  # voiced samples fed since the newest request
            self._want: list[int | None] = [None] * self.lanes  # waiting request per lane (audio length)
            self._running: list[int | None] = [None] * self.lanes  # audio length of each lane's pass
            self._done: tuple[int, Transcript] | None = None  # newest finished pass
            self._error: BaseException | None = None
            self.passes = 0
            self.final_wait_ms: float | None = None
            self.final_reused = False  # the final text came from a pass started before final()

    # ---- caller side -------------------------------------------------------------------------
    def feed(self, samples: np.ndarray, voiced: bool = True) -> None:
        samples = np.asarray(samples, np.float32).reshape(-1)
        with self._cond:
            end = self._n + samples.size
            if end > self._audio.size:  # grow; a pass still reading the old array keeps it
                grown = np.zeros(max(end, 2 * self._audio.size), np.float32)
                grown[: self._n] = self._audio[: self._n]
                self._audio = grown
            self._audio[self._n : end] = samples
            self._n = end
            if voiced:
                self._voiced_end, self._was_voiced = end, True
                self._fresh += samples.size
                if self._fresh >= self.interval:
                    self._request(final=False)
            elif self._was_voiced:  # a pause begins: the speculative final pass
                self._was_voiced = False
                if self._asked < self._voiced_end:
                    self._request(final=True)

    @property
    def partial(self) -> str:
        """The newest partial text ("" before the first pass returns)."""
        done = self._done
        return done[1].text if done is not None else ""

    @property
    def audio_s(self) -> float:
        return self._n / SAMPLE_RATE

    def final(self, timeout: float = 30.0) -> Transcript:
        """The text of the whole utterance: the newest pass if it covers every voiced sample
        (waiting for it if it is in flight), else a new pass over all of it (on the final lane,
        or queued behind the pass in flight with one lane). Its `ms` is that pass's compute
        time; `final_wait_ms` is how long this call waited."""
        t0 = time.perf_counter()
        with self._cond:
            target = self._voiced_end
            if target == 0:
                self.final_wait_ms = 0.0
                return Transcript("", 0.0, self._n / SAMPLE_RATE)
            pending = [n for n in (*self._want, *self._running) if n is not None]
            self.final_reused = self._covers(target) or any(n >= target for n in pending)
            if not self.final_reused:
                self._request(final=True)
            if not self._cond.wait_for(lambda: self._covers(target) or self._error is not None, timeout):
                raise TimeoutError(f"no transcript within {timeout} s")
            if self._error is not None and not self._covers(target):
                raise self._error
            self.final_wait_ms = (time.perf_counter() - t0) * 1000
            assert self._done is not None
            return self._done[1]

    def stats(self) -> dict[str, Any]:
        return {"passes": self.passes, "final_wait_ms": self.final_wait_ms,
                "final_reused": self.final_reused, "audio_s": self.audio_s}  # fmt: skip

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        threads, self._threads = self._threads, [None] * self.lanes
        for thread in threads:
            if thread is not None and thread is not threading.current_thread():
                thread.join(timeout=5.0)

    # ---- internals (called with the lock held) ------------------------------------------------
    def _covers(self, target: int) -> bool:
        return self._done is not None and self._done[0] >= target

    def _idle(self, lane: int) -> bool:
        return self._want[lane] is None and self._running[lane] is None

    def _request(self, final: bool) -> None:
        """Ask for a pass over the audio so far. A partial pass goes to lane 0; a final one to
        the last lane, or to lane 0 when that is idle and the last is busy."""
        n = self._asked = min(self._n, self._voiced_end + self.tail)
        self._fresh = 0
        lane = 0
        if final and self.lanes > 1:
            lane = 0 if self._idle(0) and not self._idle(1) else 1
            if self._want[0] is not None and lane == 1:
                self._want[0] = None  # a waiting partial pass: this one covers it
        self._want[lane] = n
        if self._threads[lane] is None and not self._closed:
            thread = threading.Thread(target=self._run, args=(lane,), name=f"asr-partials-{lane}", daemon=True)
            self._threads[lane] = thread
            thread.start()
        self._cond.notify_all()

    # ---- worker threads ------------------------------------------------------------------------
    def _run(self, lane: int) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._want[lane] is not None or self._closed)
                if self._closed:
                    return
                n, gen = self._want[lane], self._gen
                self._want[lane] = None
                assert n is not None
                self._running[lane] = n
                audio = self._audio[:n]  # the writer only appends past n (or reallocates)
            result: Transcript | None = None
            try:
                result = self.asr.transcribe(audio)
            except Exception as exc:  # handed to final(); partials just stop improving
                log.exception("partial transcription failed")
                with self._cond:
                    if gen == self._gen:
                        self._error = exc
            newest = False
            with self._cond:
                if gen == self._gen:
                    self._running[lane] = None
                    self.passes += 1
                    if result is not None and (self._done is None or n >= self._done[0]):
                        self._done, newest = (n, result), True
                self._cond.notify_all()
            if newest and result is not None and self.on_partial is not None:
                try:
                    self.on_partial(Partial(result.text, n / SAMPLE_RATE, result.ms))
                except Exception:
                    log.exception("on_partial callback failed")
