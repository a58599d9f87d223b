"""The real collaborators of a Call, behind the small interfaces call.py asks for: silero-vad as
the Detector, Whisper with partial transcripts as the Transcriber, the microphone from Settings,
the end-of-turn model (Smart Turn) and `make_call_parts` that builds them (model loads happen
there, off the UI thread)."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from desktop.media.vad import SileroVAD, SpeechStart, VadConfig

log = logging.getLogger(__name__)

# A call's VAD: speech confirmed after one 32 ms chunk (a barge-in silences the speaker sooner;
# the echo canceller keeps the assistant's own voice out), the turn ended after 500 ms of silence
# (the speculative final transcript still fits in it; measured with bench/call.py). That is the
# silence rule ("End of turn: silence only", and whenever the end-of-turn model cannot load).
CALL_VAD = VadConfig(min_speech_ms=32, end_silence_ms=500)
# The smart rule: 200 ms of silence is a pause the end-of-turn model judges (≈65 ms a call);
# pauses inside a sentence last 200–1,000 ms, so most turns end ≈300 ms after the last word and
# none inside a pause (bench/turn_end.py).
CALL_VAD_PAUSES = VadConfig(min_speech_ms=32, end_silence_ms=200)
END_OF_TURN = ("smart", "silence")  # the setting's choices


class VadDetector:
    """SileroVAD → ("start" | "end", t) events; with `pauses`, its end of speech is reported as a
    "pause" (the end-of-turn model decides). `voiced` says whether the latest chunk is speech."""

    def __init__(self, vad: SileroVAD | None = None, *, pauses: bool = False) -> None:
        self.vad = vad or SileroVAD()
        self.ended = "pause" if pauses else "end"

    @property
    def voiced(self) -> bool:
        return self.vad.voiced

    def feed(self, samples: np.ndarray, t: float) -> list[tuple[str, float]]:
        return [("start" if isinstance(e, SpeechStart) else self.ended, e.t) for e in self.vad.process(samples, t)]

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

    def words_so_far(self, timeout: float = 1.0) -> str:
        """The text of every voiced sample so far (the pause's pass, usually under way)."""
        return self.partials.final(timeout=timeout).text

    def cancel(self) -> None:
        self.partials.reset()

    def close(self) -> None:
        self.partials.close()


@dataclass
class CallParts:
    """`turn_model`: the end-of-turn model (the smart rule), None for the silence rule;
    `notice`: why the smart rule was asked for and is not used ("" when all is well)."""

    mic: Any
    detector: VadDetector
    transcriber: WhisperTranscriber
    canceller: Any = None
    turn_model: Any = None
    notice: str = ""


def end_of_turn_model(end_of_turn: str = "smart") -> tuple[Any, str]:
    """The end-of-turn model for the setting ("smart" | "silence"), or None and, when "smart"
    could not load, a notice for the user (the call then ends turns after a silence)."""
    if end_of_turn != "smart":
        return None, ""
    from desktop.media.smart_turn import SmartTurn, SmartTurnUnavailable

    try:
        return SmartTurn(), ""
    except SmartTurnUnavailable as exc:
        log.warning("Smart end of turn is off: %s", exc.message)
        return None, f"{exc.message.rstrip('.')}. Turns end after half a second of silence instead."


def make_call_parts(input_device: str | int | None = None, *, asr: Any = None, asr_device: str = "cpu",
                    threads: int = 1, vad: VadConfig | None = None, mic: Any = None,
                    canceller: Any = None, end_of_turn: str = "smart") -> CallParts:
    """Open the microphone (MicUnavailable when there is none) and load the VAD, the end-of-turn
    model (`end_of_turn`: "smart", or "silence" for the silence rule alone; a model that cannot
    load gives the silence rule and a notice) and, unless one is given, Whisper (ASRUnavailable /
    VADUnavailable with plain messages). Slow (≈0.5 s): call it off the UI thread."""
    from desktop.media.asr import WhisperASR
    from desktop.media.mic import Microphone
    from desktop.media.partials import PartialTranscriber

    turn_model, notice = end_of_turn_model(end_of_turn)
    smart = turn_model is not None
    detector = VadDetector(SileroVAD(vad or (CALL_VAD_PAUSES if smart else CALL_VAD)), pauses=smart)
    asr = asr if asr is not None else WhisperASR(device=asr_device, threads=threads)
    source = mic if mic is not None else Microphone(input_device)
    return CallParts(source, detector, WhisperTranscriber(PartialTranscriber(asr)), canceller, turn_model, notice)
