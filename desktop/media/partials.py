"""Partial transcripts while the user talks: the utterance so far is re-transcribed on a background
thread (one pass in flight, newest audio wins), and the final text reuses a pass that already
covers every voiced sample, so most of the ASR time hides inside the end-of-turn silence."""

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
    begins — that pass is the speculative final: if no more speech comes before the VAD ends
    the turn, `final()` returns its text without a new pass. Passes run on one worker thread and
    never block `feed`; a request made while a pass runs replaces any older waiting request.
    `on_partial(Partial)` is called on the worker thread. `reset()` between utterances.

    Measured on 2 cores (tiny.en int8, espeak speech fed at real-time pace, 600 ms end silence):
    a pass costs 0.35–0.6 s whatever the length. Last voiced sample → final text fell from
    ≈1.0–1.2 s (one pass after SpeechEnd) to ≈0.61–0.67 s — the silence wait alone — when the
    pause pass could start at once; when a partial pass was still running at the pause, the
    pause pass queued behind it and the final came 350–400 ms after SpeechEnd (saving ≈0.1 s).
    `interval_ms` 700 keeps partials live (a new text about every 0.7 s of speech) while the
    CPU stays partly free; 400 ms kept ASR running nonstop and made that queueing more likely."""

    def __init__(self, asr: Transcriber, *, interval_ms: float = 700, tail_ms: float = 200,
                 on_partial: Callable[[Partial], None] | None = None) -> None:  # fmt: skip
        self.asr = asr
        self.interval = int(interval_ms * SAMPLE_RATE / 1000)
        self.tail = int(tail_ms * SAMPLE_RATE / 1000)  # silence kept after the last voiced sample
        self.on_partial = on_partial
        self._cond = threading.Condition()
        self._audio = np.zeros(30 * SAMPLE_RATE, np.float32)
        self._thread: threading.Thread | None = None
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
            self._want: int | None = None  # waiting request (audio length)
            self._running: int | None = None  # audio length of the pass in flight
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
                    self._request()
            elif self._was_voiced:  # a pause begins: the speculative final pass
                self._was_voiced = False
                if self._asked < self._voiced_end:
                    self._request()

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
        (waiting for it if it is in flight), else a new pass over all of it (queued behind the
        one in flight). Its `ms` is that pass's compute time; `final_wait_ms` is how long this
        call waited."""
        t0 = time.perf_counter()
        with self._cond:
            target = self._voiced_end
            if target == 0:
                self.final_wait_ms = 0.0
                return Transcript("", 0.0, self._n / SAMPLE_RATE)
            pending = [n for n in (self._want, self._running) if n is not None]
            self.final_reused = self._covers(target) or any(n >= target for n in pending)
            if not self.final_reused:
                self._request()
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
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5.0)

    # ---- internals (called with the lock held) ------------------------------------------------
    def _covers(self, target: int) -> bool:
        return self._done is not None and self._done[0] >= target

    def _request(self) -> None:
        self._asked = self._want = min(self._n, self._voiced_end + self.tail)
        self._fresh = 0
        if self._thread is None and not self._closed:
            self._thread = threading.Thread(target=self._run, name="asr-partials", daemon=True)
            self._thread.start()
        self._cond.notify_all()

    # ---- worker thread -------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._want is not None or self._closed)
                if self._closed:
                    return
                n, gen, self._want = self._want, self._gen, None
                assert n is not None
                self._running = n
                audio = self._audio[:n]  # the writer only appends past n (or reallocates)
            result: Transcript | None = None
            try:
                result = self.asr.transcribe(audio)
            except Exception as exc:  # handed to final(); partials just stop improving
                log.exception("partial transcription failed")
                with self._cond:
                    if gen == self._gen:
                        self._error = exc
            with self._cond:
                current = gen == self._gen
                if current:
                    self._running = None
                    self.passes += 1
                    if result is not None and (self._done is None or n >= self._done[0]):
                        self._done = (n, result)
                self._cond.notify_all()
            if current and result is not None and self.on_partial is not None:
                try:
                    self.on_partial(Partial(result.text, n / SAMPLE_RATE, result.ms))
                except Exception:
                    log.exception("on_partial callback failed")
