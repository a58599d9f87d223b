"""Voice activity detection: silero-vad run frame by frame on the 16 kHz microphone frames,
turned into `SpeechStart` / `SpeechEnd` events stamped with the clock times of the voiced audio."""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from desktop.errors import OmnideskError
from desktop.media.frames import SAMPLE_RATE, Frames

CHUNK = 512  # silero-vad's window at 16 kHz (32 ms); the 20 ms mic frames are buffered into it
CHUNK_S = CHUNK / SAMPLE_RATE
_CONTEXT = 64  # samples of the previous chunk that silero prepends to each window


class VADUnavailable(OmnideskError):
    """The voice activity detector cannot run (silero-vad missing or broken): no voice calls."""

    code = "vad_unavailable"


@dataclass(frozen=True, slots=True)
class SpeechStart:
    """Speech began at clock time `t` (start of the first voiced chunk); decided at `at`."""

    t: float
    at: float


@dataclass(frozen=True, slots=True)
class SpeechEnd:
    """The turn ended: its last voiced sample was at `t`; decided at `at` (t + the silence)."""

    t: float
    at: float
    start: float  # the matching SpeechStart.t


VadEvent = SpeechStart | SpeechEnd


@dataclass(frozen=True, slots=True)
class VadConfig:
    """`threshold`: speech probability that starts speech; `neg_threshold` (default threshold −
    0.15, silero's own hysteresis): below it a chunk counts as silence. `min_speech_ms`: voiced
    audio needed before SpeechStart (shorter blips are dropped). `end_silence_ms`: silence that
    ends the turn.

    600 ms of end silence: pauses inside a spoken sentence (commas, breaths, hesitations) mostly
    last 200–500 ms, so a shorter wait cuts users off mid-thought; and the speculative final
    transcription that `PartialTranscriber` starts at the first silent chunk takes ≈550–700 ms
    on 2 cores, so most of it hides inside this wait. Voice products use the same range
    (OpenAI's server VAD 500 ms, Pipecat 800 ms)."""

    threshold: float = 0.5
    neg_threshold: float | None = None
    min_speech_ms: float = 64.0
    end_silence_ms: float = 600.0

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold < 1.0:
            raise ValueError(f"threshold must be in (0, 1), not {self.threshold}")
        if self.neg_threshold is not None and not 0.0 <= self.neg_threshold <= self.threshold:
            raise ValueError(f"neg_threshold must be in [0, threshold], not {self.neg_threshold}")
        if self.min_speech_ms < 0 or self.end_silence_ms <= 0:
            raise ValueError("min_speech_ms must be >= 0 and end_silence_ms > 0")

    @property
    def off_threshold(self) -> float:
        return self.neg_threshold if self.neg_threshold is not None else max(self.threshold - 0.15, 0.01)


@functools.lru_cache(maxsize=1)
def _session() -> Any:
    """silero's packaged ONNX model, loaded once per process (onnxruntime sessions are safe to
    run from several threads; each SileroVAD keeps its own recurrent state). ONNX rather than the
    JIT model: measured here with one thread, 0.17–0.22 ms per chunk against 0.33–0.36 ms."""
    try:
        import torch

        threads = torch.get_num_threads()
        try:
            from silero_vad import load_silero_vad
        finally:
            torch.set_num_threads(threads)  # importing silero_vad sets it to 1 process-wide
        with warnings.catch_warnings():  # silero's own importlib.resources.path deprecation
            warnings.simplefilter("ignore", DeprecationWarning)
            return load_silero_vad(onnx=True).session
    except ImportError as exc:
        raise VADUnavailable("silero-vad is not installed (pip install silero-vad) — voice calls are off") from exc
    except Exception as exc:  # corrupt model file, onnxruntime failure
        raise VADUnavailable(f"The silero-vad model could not be loaded: {exc}") from exc


class SileroVAD:
    """Streaming VAD for one call. Feed it frames in order (`process`); it returns the events
    each frame completed. Not thread-safe: one reader thread feeds it. `reset()` between calls."""

    def __init__(self, config: VadConfig | None = None) -> None:
        self.config = config or VadConfig()
        self._session = _session()
        self._sr = np.array(SAMPLE_RATE, dtype=np.int64)
        self._window = np.zeros((1, _CONTEXT + CHUNK), np.float32)  # context + chunk, reused
        self._buf = np.zeros(CHUNK + 4096, np.float32)
        self.chunks = 0  # chunks run through the model since construction (for cost figures)
        self.reset()

    def reset(self) -> None:
        """Forget the audio, the model state and any speech in progress."""
        self._state = np.zeros((2, 1, 128), np.float32)
        self._window[:] = 0.0
        self._n = 0  # samples in _buf
        self._end_t = 0.0  # clock time just after the last buffered sample
        self.prob = 0.0  # speech probability of the latest chunk
        self.in_speech = False  # between SpeechStart and SpeechEnd
        self._cand: float | None = None  # start of voiced audio not yet long enough
        self._start = 0.0
        self._last_voiced = 0.0  # end of the latest voiced chunk

    @property
    def voiced(self) -> bool:
        """The latest chunk is speech (above the on-threshold, or the off-threshold once in
        speech): a caller may duck playback on it before SpeechStart is confirmed."""
        return self.prob >= (self.config.off_threshold if self.in_speech else self.config.threshold)

    def process(self, samples: np.ndarray, t: float) -> list[VadEvent]:
        """Take 16 kHz mono samples whose first one was captured at clock time `t`."""
        samples = np.asarray(samples, np.float32).reshape(-1)
        events: list[VadEvent] = []
        pos = 0
        while pos < samples.size:
            n = min(CHUNK - self._n, samples.size - pos)
            self._buf[self._n : self._n + n] = samples[pos : pos + n]
            self._n += n
            pos += n
            self._end_t = t + pos / SAMPLE_RATE
            if self._n == CHUNK:
                self._n = 0
                self._chunk(self._end_t - CHUNK_S, events)
        return events

    def process_frames(self, frames: Frames) -> list[VadEvent]:
        """`process` over every frame of a microphone read."""
        events: list[VadEvent] = []
        for frame, t in zip(frames.samples, frames.times):
            events += self.process(frame, float(t))
        return events

    def _chunk(self, t0: float, events: list[VadEvent]) -> None:
        self._window[0, _CONTEXT:] = self._buf[:CHUNK]
        out, self._state = self._session.run(None, {"input": self._window, "state": self._state, "sr": self._sr})
        self._window[0, :_CONTEXT] = self._window[0, -_CONTEXT:]
        self.chunks += 1
        self.prob = p = float(out[0, 0])
        t1 = t0 + CHUNK_S
        cfg = self.config
        if not self.in_speech:
            if p >= cfg.threshold:
                if self._cand is None:
                    self._cand = t0
                if t1 - self._cand >= cfg.min_speech_ms / 1000 - 1e-9:
                    self.in_speech, self._start, self._last_voiced = True, self._cand, t1
                    self._cand = None
                    events.append(SpeechStart(self._start, t1))
            elif p < cfg.off_threshold:
                self._cand = None  # a blip shorter than min_speech_ms
        elif p >= cfg.off_threshold:
            self._last_voiced = t1
        elif t1 - self._last_voiced >= cfg.end_silence_ms / 1000 - 1e-9:
            self.in_speech = False
            events.append(SpeechEnd(self._last_voiced, t1, self._start))
