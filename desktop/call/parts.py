"""The real collaborators of a Call, behind the small interfaces call.py asks for: silero-vad as
the Detector, Whisper with partial transcripts as the Transcriber, the microphone from Settings,
and `make_call_parts` that builds them (model loads happen there, off the UI thread)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from desktop.media.vad import SileroVAD, SpeechStart, VadConfig

# A call's VAD: speech confirmed after one 32 ms chunk (a barge-in silences the speaker sooner;
# the echo canceller keeps the assistant's own voice out), the turn ended after 500 ms of silence
# (the speculative final transcript still fits in it; measured with bench/call.py).
CALL_VAD = VadConfig(min_speech_ms=32, end_silence_ms=500)


class VadDetector:
    """SileroVAD → ("start" | "end", t) events; `voiced` says whether the latest chunk is speech."""

    def __init__(self, vad: SileroVAD | None = None) -> None:
        self.vad = vad or SileroVAD()

    @property
    def voiced(self) -> bool:
        return self.vad.voiced

    def feed(self, samples: np.ndarray, t: float) -> list[tuple[str, float]]:
        return [("start" if isinstance(e, SpeechStart) else "end", e.t) for e in self.vad.process(samples, t)]

    def reset(self) -> None:
        self.vad.reset()


class WhisperTranscriber:
    """PartialTranscriber over Whisper: partials while the user talks; `finish` waits for the
    final text on a thread of its own and reports it with the time it made the caller wait
    (most of a pass hides inside the VAD's end-of-turn silence)."""

    def __init__(self, partials: Any) -> None:
        self.partials = partials
        self._on_partial: Callable[[str], None] = lambda text: None
        partials.on_partial = lambda p: self._on_partial(p.text)

    def begin(self, pre_roll: np.ndarray, on_partial: Callable[[str], None]) -> None:
        self.partials.reset()
        self._on_partial = on_partial
        if pre_roll.size:
            self.partials.feed(pre_roll, voiced=True)

    def feed(self, samples: np.ndarray, voiced: bool = True) -> None:
        self.partials.feed(samples, voiced=voiced)

    def finish(self, on_text: Callable[[str, float], None]) -> None:
        def run() -> None:
            start = time.perf_counter()
            try:
                text = self.partials.final().text
            except Exception:  # a broken pass: nothing was understood
                text = ""
            on_text(text, (time.perf_counter() - start) * 1000.0)

        threading.Thread(target=run, name="asr-final", daemon=True).start()

    def cancel(self) -> None:
        self.partials.reset()

    def close(self) -> None:
        self.partials.close()


@dataclass
class CallParts:
    mic: Any
    detector: VadDetector
    transcriber: WhisperTranscriber
    canceller: Any = None


def make_call_parts(input_device: str | int | None = None, *, asr: Any = None, asr_device: str = "cpu",
                    threads: int = 1, vad: VadConfig | None = None, mic: Any = None,
                    canceller: Any = None) -> CallParts:
    """Open the microphone (MicUnavailable when there is none) and load the VAD and, unless one
    is given, Whisper (ASRUnavailable / VADUnavailable with plain messages). Slow (≈0.5 s): call
    it off the UI thread."""
    from desktop.media.asr import WhisperASR
    from desktop.media.mic import Microphone
    from desktop.media.partials import PartialTranscriber

    detector = VadDetector(SileroVAD(vad or CALL_VAD))
    asr = asr if asr is not None else WhisperASR(device=asr_device, threads=threads)
    source = mic if mic is not None else Microphone(input_device)
    return CallParts(source, detector, WhisperTranscriber(PartialTranscriber(asr)), canceller)
