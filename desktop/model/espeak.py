"""ctypes binding to the libespeak-ng shipped in `espeakng-loader`: one process-wide engine that
synthesises text in-process through a synth callback, chunk by chunk, abortable between chunks."""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

# espeak_ng/speak_lib.h constants.
_AUDIO_OUTPUT_SYNCHRONOUS = 2
_BUFLENGTH_MS = 100  # espeak delivers audio in callbacks of about this length
_POS_CHARACTER = 1
_CHARS_UTF8 = 1
_RATE = 1  # espeakRATE parameter id
_EE_OK = 0


class _Voice(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("languages", ctypes.c_void_p),  # see _languages(): not a plain C string
        ("identifier", ctypes.c_char_p),
        ("gender", ctypes.c_ubyte),
        ("age", ctypes.c_ubyte),
        ("variant", ctypes.c_ubyte),
        ("xx1", ctypes.c_ubyte),
        ("score", ctypes.c_int),
        ("spare", ctypes.c_void_p),
    ]


# int callback(short *wav, int numsamples, espeak_EVENT *events); return 1 to abort synthesis.
_SynthCallback = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p
)


class EspeakLibrary:
    """The loaded, initialised library. espeak-ng keeps global state, so there is exactly one per
    process (`get()`), and every call that touches that state holds `lock`."""

    _instance: EspeakLibrary | None = None
    _create_lock = threading.Lock()

    def __init__(self) -> None:
        import espeakng_loader

        self.lib = ctypes.CDLL(espeakng_loader.get_library_path())
        self.data_path = Path(espeakng_loader.get_data_path())
        data = str(self.data_path).encode()
        self.lock = threading.Lock()
        self._declare()
        rate = self.lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, _BUFLENGTH_MS, data, 0)
        if rate <= 0:
            raise OSError(f"espeak_Initialize failed ({rate})")
        self.sample_rate: int = rate
        self._sink: Callable[[np.ndarray], bool] | None = None
        # Keep a reference: ctypes callbacks are freed when the Python object is.
        self._callback = _SynthCallback(self._on_audio)
        self.lib.espeak_SetSynthCallback(self._callback)

    @classmethod
    def get(cls) -> EspeakLibrary:
        """The process-wide library, loaded and initialised on first use."""
        with cls._create_lock:
            if cls._instance is None:
                cls._instance = cls()
            return cls._instance

    def _declare(self) -> None:
        lib = self.lib
        lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.espeak_Initialize.restype = ctypes.c_int
        lib.espeak_SetSynthCallback.argtypes = [_SynthCallback]
        lib.espeak_SetSynthCallback.restype = None
        lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        lib.espeak_SetVoiceByName.restype = ctypes.c_int
        lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.espeak_SetParameter.restype = ctypes.c_int
        lib.espeak_Synth.argtypes = [
            ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int, ctypes.c_uint,
            ctypes.c_uint, ctypes.POINTER(ctypes.c_uint), ctypes.c_void_p,
        ]  # fmt: skip
        lib.espeak_Synth.restype = ctypes.c_int
        lib.espeak_ListVoices.argtypes = [ctypes.c_void_p]
        lib.espeak_ListVoices.restype = ctypes.POINTER(ctypes.POINTER(_Voice))

    def _on_audio(self, wav: Any, numsamples: int, _events: Any) -> int:
        # Runs inside espeak_Synth, on the synthesising thread, with `lock` held.
        sink = self._sink
        if sink is None:
            return 1
        if not wav or numsamples <= 0:
            return 0
        pcm = np.ctypeslib.as_array(wav, shape=(numsamples,))
        return 0 if sink(pcm.astype(np.float32) / 32768.0) else 1

    def synth(
        self, text: str, voice: str, rate_wpm: int, sink: Callable[[np.ndarray], bool]
    ) -> None:
        """Synthesise `text`, calling `sink(chunk)` with float32 mono chunks as they are made.
        `sink` returns False to abort; synthesis then stops before the next chunk."""
        data = text.encode("utf-8") + b"\0"
        with self.lock:
            if self.lib.espeak_SetVoiceByName(voice.encode()) != _EE_OK:
                raise ValueError(f"espeak-ng has no voice {voice!r}")
            self.lib.espeak_SetParameter(_RATE, int(rate_wpm), 0)
            self._sink = sink
            try:
                err = self.lib.espeak_Synth(
                    data, len(data), 0, _POS_CHARACTER, 0, _CHARS_UTF8, None, None
                )
            finally:
                self._sink = None
        if err != _EE_OK:
            raise OSError(f"espeak_Synth failed ({err})")

    def has_voice(self, voice: str) -> bool:
        """Whether espeak-ng accepts `voice` (a language like `en-us`, a voice name, `+variant`)."""
        with self.lock:
            return self.lib.espeak_SetVoiceByName(voice.encode()) == _EE_OK

    def voices(self) -> list[str]:
        """Language names espeak-ng can speak (`en-us`, `de`, …), sorted, without duplicates. A
        voice whose dictionary is not in the data folder is left out: selecting it would fail,
        and espeak-ng would print "Can't read dictionary file" to the app's terminal."""
        names: set[str] = set()
        with self.lock:
            array = self.lib.espeak_ListVoices(None)
            i = 0
            while array[i]:
                voice = array[i].contents
                languages = _languages(voice)
                if languages and (self.data_path / f"{_dictionary(self.data_path, voice, languages)}_dict").is_file():
                    names.update(languages)
                i += 1
        return sorted(names)


def _dictionary(data: Path, voice: _Voice, languages: list[str]) -> str:
    """The dictionary a voice loads: its file's `dictionary` line, else its first language's
    base name (`en-us` → `en`), as espeak-ng picks it."""
    name = languages[0].split("-")[0]
    try:
        lines = (data / "lang" / (voice.identifier or b"").decode("utf-8", "replace")).read_text("utf-8", "replace")
    except OSError:
        return name
    for line in lines.splitlines():
        words = line.split()
        if len(words) > 1 and words[0] == "dictionary":
            name = words[1]
    return name


def _languages(voice: _Voice) -> list[str]:
    """Decode `languages`: repeated (priority byte, NUL-terminated name), ended by a zero byte."""
    addr = voice.languages
    out: list[str] = []
    while addr and ctypes.c_ubyte.from_address(addr).value != 0:
        name = ctypes.string_at(addr + 1)
        out.append(name.decode("utf-8", "replace"))
        addr += 1 + len(name) + 1
    return out
