"""Smart Turn v3.2: a small learned end-of-turn model (Whisper-tiny encoder + a head, int8 ONNX,
BSD-2) that hears whether the user finished their sentence or only paused mid-thought.

The model ships inside the `pipecat-ai` wheel (installed with --no-deps); its file is found from
the package's installed-files list, never by importing pipecat. Input: the last ≤ 8 s of the
turn's 16 kHz audio, zero-padded at the front to 8 s, as Whisper log-mel features
(`WhisperFeatureExtractor(chunk_length=8)`, normalised); output: the probability that the turn
is complete."""

from __future__ import annotations

import functools
import importlib.metadata
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from desktop.errors import OmnideskError

SAMPLE_RATE = 16000
WINDOW_S = 8  # the model's input: this many seconds, the turn's end last
PACKAGE = "pipecat-ai"
MODEL_FILE = "smart-turn-v3.2-cpu.onnx"


class SmartTurnUnavailable(OmnideskError):
    """The end-of-turn model cannot run (onnxruntime or the model package missing or broken):
    calls end turns after a silence instead."""

    code = "smart_turn_unavailable"


class TurnVerdict(NamedTuple):
    complete: bool  # the user has finished their turn
    probability: float  # the model's probability that the turn is complete
    ms: float  # what the call cost (features + model)


def model_path() -> Path:
    """The packaged ONNX file, from pipecat-ai's list of installed files (no import of pipecat)."""
    try:
        dist = importlib.metadata.distribution(PACKAGE)
    except importlib.metadata.PackageNotFoundError as exc:
        raise SmartTurnUnavailable(f"The end-of-turn model is not installed (pip install --no-deps {PACKAGE})") from exc
    for file in dist.files or ():
        if file.name == MODEL_FILE:
            path = Path(str(dist.locate_file(file)))
            if path.is_file():
                return path
    raise SmartTurnUnavailable(f"{PACKAGE} is installed without {MODEL_FILE}")


@functools.lru_cache(maxsize=4)
def _session(path: str, threads: int) -> Any:
    """One onnxruntime session per model file, kept for the process (sessions are safe to run
    from several threads). One intra-op thread, sequential: a call costs ≈65 ms on one core and
    the LLM, ASR and TTS share the others."""
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise SmartTurnUnavailable("onnxruntime is not installed: the end-of-turn model cannot run") from exc
    options = ort.SessionOptions()
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # no core burnt while idle
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    try:
        return ort.InferenceSession(path, sess_options=options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # a corrupt or foreign file
        raise SmartTurnUnavailable(f"The end-of-turn model could not be loaded: {exc}") from exc


@functools.lru_cache(maxsize=1)
def _extractor() -> Any:
    from transformers import WhisperFeatureExtractor

    return WhisperFeatureExtractor(chunk_length=WINDOW_S)


class LogMel:
    """Whisper's normalised log-mel features of an 8 s window, as
    `WhisperFeatureExtractor(chunk_length=8)(window, do_normalize=True)` computes them (its mel
    filters; the test holds the two equal), in plain numpy: the extractor's own path runs torch's
    STFT on the process's OpenMP threads, which it shares with the LLM (measured under load:
    ≈380 ms with 2 threads against ≈25 ms here)."""

    def __init__(self) -> None:
        fe = _extractor()
        self.n_fft, self.hop = fe.n_fft, fe.hop_length
        self.filters = np.asarray(fe.mel_filters, np.float32)  # (n_fft // 2 + 1, 80)
        self.hann = np.hanning(self.n_fft + 1)[:-1].astype(np.float32)  # periodic, as torch.hann_window

    def __call__(self, window: np.ndarray) -> np.ndarray:
        x = window.astype(np.float32)
        x = (x - x.mean()) / np.sqrt(x.var() + 1e-7)  # do_normalize: zero mean, unit variance
        x = np.pad(x, self.n_fft // 2, mode="reflect")  # centred frames
        frames = np.lib.stride_tricks.sliding_window_view(x, self.n_fft)[:: self.hop]
        spec = np.fft.rfft(frames * self.hann, axis=1)
        mel = (spec.real**2 + spec.imag**2) @ self.filters  # (frames, 80)
        log = np.log10(np.maximum(mel, 1e-10)).T[:, :-1]  # Whisper drops the last frame
        log = np.maximum(log, log.max() - 8.0)
        return ((log + 4.0) / 4.0).astype(np.float32)[None]


def last_window(audio: np.ndarray) -> np.ndarray:
    """The last WINDOW_S seconds of `audio`, zeros in front of a shorter turn (the model was
    trained with the turn's end at the end of its window)."""
    audio = np.asarray(audio, np.float32).reshape(-1)
    n = WINDOW_S * SAMPLE_RATE
    if audio.size >= n:
        return audio[-n:]
    return np.concatenate([np.zeros(n - audio.size, np.float32), audio])


class SmartTurn:
    """`predict(audio16k)` → TurnVerdict for the turn heard so far (its audio up to the pause).
    Loads the model in `__init__` (SmartTurnUnavailable when it cannot). `threshold`: the
    probability above which the turn counts as complete. Safe to call from any thread.
    `calls` and `total_ms` add up what the predictions cost."""

    def __init__(self, path: str | Path | None = None, *, threshold: float = 0.5, threads: int = 1) -> None:
        self.path = Path(path) if path is not None else model_path()
        if not self.path.is_file():
            raise SmartTurnUnavailable(f"The end-of-turn model is missing: {self.path}")
        self.threshold = threshold
        self._session = _session(str(self.path), threads)
        try:
            self._log_mel = LogMel()
        except Exception as exc:  # transformers missing or broken
            raise SmartTurnUnavailable(f"Whisper features are unavailable: {exc}") from exc
        self.calls, self.total_ms = 0, 0.0
        self._lock = threading.Lock()  # the counters only

    def features(self, audio: np.ndarray) -> np.ndarray:
        """Whisper log-mel features of the last 8 s, shape (1, 80, 800), float32."""
        return self._log_mel(last_window(audio))

    def predict(self, audio: np.ndarray) -> TurnVerdict:
        start = time.perf_counter()
        (logits,) = self._session.run(None, {"input_features": self.features(audio)})
        probability = float(np.asarray(logits).reshape(-1)[0])  # the exported head ends in a sigmoid
        ms = (time.perf_counter() - start) * 1000.0
        with self._lock:
            self.calls += 1
            self.total_ms += ms
        return TurnVerdict(probability > self.threshold, probability, ms)
