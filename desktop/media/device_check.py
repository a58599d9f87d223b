"""Trying a device from Settings → Audio: a short test tone through a speaker, and a microphone's
level while the user speaks. Both go through the device interfaces (BufferedSink, Capture), so
the fake devices test them on a virtual clock."""

from __future__ import annotations

import itertools
from typing import Any, Callable

import numpy as np

from desktop.media.frames import SILENCE_DB

OpenDevice = Callable[["str | None"], Any]  # a saved device key (None: the system's) → a device, not started
TONE_RATE = 24000
_ids = itertools.count(1)


def test_tone(seconds: float = 1.0, hz: float = 440.0, gain: float = 0.2, rate: int = TONE_RATE) -> np.ndarray:
    """A soft sine with 20 ms fades (no click at either end)."""
    t = np.arange(int(seconds * rate), dtype=np.float32) / rate
    tone = (gain * np.sin(2 * np.pi * hz * t)).astype(np.float32)
    fade = min(int(0.02 * rate), tone.size // 2)
    ramp = np.linspace(0.0, 1.0, fade, dtype=np.float32)
    tone[:fade] *= ramp
    tone[tone.size - fade:] *= ramp[::-1]
    return tone


class ToneTest:
    """`play(device)` opens that speaker and plays the tone; `poll()` closes it once played
    (True while it still plays). AudioUnavailable from `play` when the speaker will not open."""

    def __init__(self, open_speaker: OpenDevice, seconds: float = 1.0) -> None:
        self.open_speaker, self.seconds = open_speaker, seconds
        self.speaker: Any = None
        self._rid = ""

    def play(self, device: str | None) -> None:
        self.stop()
        speaker = self.open_speaker(device)
        try:
            speaker.start()
            self._rid = f"tone-{next(_ids)}"
            speaker.write(self._rid, test_tone(self.seconds), TONE_RATE)
            speaker.end(self._rid)
        except BaseException:
            speaker.close()
            raise
        self.speaker = speaker

    @property
    def playing(self) -> bool:
        return self.speaker is not None

    def poll(self) -> bool:
        if self.speaker is not None and self.speaker.queued_s(self._rid) <= 0:
            self.stop()
        return self.playing

    def stop(self) -> None:
        speaker, self.speaker = self.speaker, None
        if speaker is not None:
            speaker.close()


class MicLevel:
    """`start(device)` opens that microphone; `level_db()` is the loudest frame since the last
    call (SILENCE_DB when none came); `stop()` closes it. MicUnavailable from `start`."""

    def __init__(self, open_mic: OpenDevice) -> None:
        self.open_mic = open_mic
        self.mic: Any = None

    def start(self, device: str | None) -> None:
        self.stop()
        mic = self.open_mic(device)
        try:
            mic.start()
        except BaseException:
            mic.close()
            raise
        self.mic = mic

    @property
    def on(self) -> bool:
        return self.mic is not None

    def level_db(self) -> float:
        if self.mic is None:
            return SILENCE_DB
        frames = self.mic.read()
        return float(frames.levels.max()) if len(frames) else SILENCE_DB

    def stop(self) -> None:
        mic, self.mic = self.mic, None
        if mic is not None:
            mic.close()


def real_speaker(device: str | None) -> Any:
    from desktop.media.audio_out import SpeakerOutput

    return SpeakerOutput(device)


def real_mic(device: str | None) -> Any:
    from desktop.media.mic import Microphone

    return Microphone(device)
