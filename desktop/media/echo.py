"""Echo cancellation for calls on speakers: WebRTC AEC3 + noise suppression (pywebrtc-audio) on the
microphone's 16 kHz frames, with what the speaker played at the same clock time as the reference."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from desktop.media.double_talk import DoubleTalkDetector
from desktop.media.far_end import FarEndReference
from desktop.media.frames import SAMPLE_RATE

BLOCK = 160  # WebRTC processes 10 ms blocks; process() pads a shorter tail, so feed it whole ones
# Output lags input by a fixed amount (pywebrtc-audio 0.2.0, measured by cross-correlation):
# AEC3 128 samples, noise suppression another 96: a cleaned frame stamped t holds audio from
# t - lag.
AEC_LAG = 128
NS_LAG = 96
_FAR_ACTIVE = 10 ** (-50 / 10)  # far-end block mean square above -50 dBFS: the speaker is talking
_TINY = 1e-12


@dataclass(frozen=True, slots=True)
class EchoConfig:
    delay_ms: float = 0.0  # system latency: the reference is read this much earlier than the mic
    noise_suppression: bool = True
    ns_level: int = 1  # 0-3: 6, 12, 18, 21 dB
    stream_delay_ms: int = 0  # hint to WebRTC; 0 lets AEC3 estimate the echo path delay itself
    erle_window_s: float = 1.0  # time constant of the recent-ERLE average
    double_talk: bool = True  # tell the user's voice from the echo on the raw microphone (near_talk)
    reference_wait_ms: float = 30.0  # wait this long for a speaker running a little behind the mic

    def __post_init__(self) -> None:
        if self.delay_ms < 0:
            raise ValueError(f"delay_ms must be >= 0 (got {self.delay_ms})")
        if self.ns_level not in (0, 1, 2, 3):
            raise ValueError(f"ns_level must be 0-3 (got {self.ns_level})")


class EchoCanceller:
    """`process(frame, t)` cleans one microphone frame (16 kHz float32, any length; its first
    sample captured at clock time t) and returns as many samples. The far end for the same
    span, `delay_ms` earlier, comes from `far` (silence when nothing played or no reference is
    wired: then only noise suppression acts). Frames that are not whole 10 ms blocks are carried
    over, so their output lags a little more (`lag_s`). One thread at a time."""

    def __init__(self, far: FarEndReference | None = None, rate: int = SAMPLE_RATE,
                 config: EchoConfig | None = None) -> None:  # fmt: skip
        if rate != SAMPLE_RATE:
            raise ValueError(f"the microphone frames are {SAMPLE_RATE} Hz (got {rate})")
        from pywebrtc_audio import AudioProcessor

        self.far, self.rate, self.config = far, rate, config or EchoConfig()
        c = self.config
        self._ap: Any = AudioProcessor(rate, echo_cancellation=True,
                                       noise_suppression=c.noise_suppression, ns_level=c.ns_level,
                                       stream_delay_ms=c.stream_delay_ms)  # fmt: skip
        self._lib_lag = AEC_LAG + (NS_LAG if c.noise_suppression else 0)
        self._alpha = 1.0 - math.exp(-BLOCK / rate / c.erle_window_s)
        self.double_talk = DoubleTalkDetector() if c.double_talk and far is not None else None
        self.near_talk = False  # the user talked over the far end in the last process() call
        self._start()

    def _start(self) -> None:
        self._pending = np.zeros(0, np.float32)  # input not yet a whole block
        self._pending_t = 0.0  # clock time of _pending[0]
        self._out = np.zeros(0, np.float32)  # cleaned, not handed out yet
        self._carry: int | None = None  # samples of carry-over latency, fixed by the first frame
        self.gaps = 0  # times the frame size changed so that silence had to be inserted
        self._zero_stats()

    @property
    def lag_s(self) -> float:
        """How far the cleaned audio lags the input: WebRTC's own delay plus the carry-over."""
        return (self._lib_lag + (self._carry or 0)) / self.rate

    def _zero_stats(self) -> None:
        self.blocks = 0
        self.far_active_blocks = 0
        self.far_late_blocks = 0  # blocks whose reference was not all played when processed
        self._near_e = self._out_e = 0.0  # summed over far-active blocks
        self._near_avg = self._out_avg = 0.0  # exponential averages over far-active blocks

    def process(self, near: np.ndarray, t: float) -> np.ndarray:
        near = np.asarray(near, np.float32).reshape(-1)
        if self._carry is None:
            # A steady frame size of f leaves at most BLOCK - gcd(f, BLOCK) samples pending:
            # hand out that much silence first so that the output never has to wait mid-stream.
            self._carry = BLOCK - math.gcd(near.size, BLOCK) if near.size % BLOCK else 0
            self._out = np.zeros(self._carry, np.float32)
        if self._pending.size == 0:
            self._pending_t = t
        data = np.concatenate([self._pending, near]) if self._pending.size else near
        n = data.size - data.size % BLOCK
        self.near_talk = False
        if n:
            far = self._far(self._pending_t, n)
            self.near_talk = self.double_talk is not None and self.double_talk.feed(data[:n], far)
            out = self._ap.process(data[:n], far)
            self._measure(data[:n], far, out)
            self._out = np.concatenate([self._out, out]) if self._out.size else out
        self._pending = data[n:].copy()
        self._pending_t += n / self.rate
        if self._out.size < near.size:  # the frame size changed: a gap of silence
            self.gaps += 1
            gap = np.zeros(near.size - self._out.size, np.float32)
            self._out = np.concatenate([gap, self._out])
        result, self._out = self._out[: near.size], self._out[near.size :]
        return result

    def _far(self, t: float, n: int) -> np.ndarray:
        if self.far is None:
            return np.zeros(n, np.float32)
        samples, complete = self.far.read_waiting(t - self.config.delay_ms / 1000, n, self.config.reference_wait_ms / 1000)
        if not complete and self.far.started:
            self.far_late_blocks += n // BLOCK
        return samples

    def _measure(self, near: np.ndarray, far: np.ndarray, out: np.ndarray) -> None:
        a = self._alpha
        for i in range(0, near.size, BLOCK):
            self.blocks += 1
            f = far[i : i + BLOCK]
            if float(np.dot(f, f)) / BLOCK < _FAR_ACTIVE:
                continue
            self.far_active_blocks += 1
            x, y = near[i : i + BLOCK], out[i : i + BLOCK]
            ne, oe = float(np.dot(x, x)), float(np.dot(y, y))
            self._near_e += ne
            self._out_e += oe
            self._near_avg += a * (ne - self._near_avg)
            self._out_avg += a * (oe - self._out_avg)

    @property
    def speech_probability(self) -> float:
        """WebRTC's spectral speech estimate for the last block (0-1)."""
        return float(self._ap.speech_probability)

    def stats(self) -> dict[str, Any]:
        """ERLE-like figures: microphone energy in over cleaned energy out while the far end
        plays (dB; includes the user's speech during double talk, so it reads low then)."""
        return {
            "erle_db": 10 * math.log10((self._near_e + _TINY) / (self._out_e + _TINY)),
            "erle_recent_db": 10 * math.log10((self._near_avg + _TINY) / (self._out_avg + _TINY)),
            "blocks": self.blocks,
            "far_active_blocks": self.far_active_blocks,
            "far_late_blocks": self.far_late_blocks,
            "lag_ms": self.lag_s * 1000,
        }

    def false_alarm(self) -> None:
        """A `near_talk` that turned out not to be speech: be more careful for a while."""
        if self.double_talk is not None:
            self.double_talk.false_alarm()

    def reset(self) -> None:
        """Forget the echo path and noise estimates (a new call), keep the configuration."""
        self._ap.reset()
        if self.double_talk is not None:
            self.double_talk = DoubleTalkDetector()
        self._start()
