"""Double-talk detection: is the user talking while the speaker plays? Decided on the RAW
microphone against what the speaker played, before echo cancellation, because WebRTC's AEC3
suppresses the start of double talk for ~100 ms (the user's first syllables are often quieter
than the echo) and a barge-in must silence the speaker sooner than that.

Per 20 ms frame and per frequency band, a small echo-path model in the energy domain predicts the
echo from the last ~300 ms of the far end: echo_b(t) = Σ_l h_b[l] · far_b(t - l), with h ≥ 0
learned by NLMS while only the far end talks. The user talks when, in at least `need` bands, the
microphone holds `margin_db` more than the predicted echo plus twice the noise floor. A fricative
or a vowel of the user lands in bands where the assistant's voice has little energy at that
moment, so it stands out within a frame or two of its onset. Measured on the echo tests' rooms
(30–80 ms, gain 0.3–0.6, reflections, noise): onset detected 7 ms after the user's first sample
(the cleaned level rises 127 ms after it), no detection over 5.5 s of echo alone.

`false_alarm()` (a detection the VAD did not confirm) raises the margin 3 dB for a while, so a
room that fools the model costs a few short dips, not a stuttering reply."""

from __future__ import annotations

import numpy as np

from desktop.media.frames import FRAME_SAMPLES, SAMPLE_RATE

EDGES_HZ = (250, 500, 750, 1000, 1300, 1600, 2000, 2500, 3000, 3600, 4300, 5000, 5800, 6600, 7400, 8000)
NFFT = 512
LAGS = 16  # frames of far-end history in the model: 320 ms of echo path
MARGIN_DB = 10.0
NEED = 2  # bands over the prediction
MU = 0.2  # NLMS step
WARMUP = 25  # learning frames with the far end active before any decision (0.5 s)
FALSE_ALARM_DB, FALSE_ALARM_MAX_DB = 3.0, 12.0
FALSE_ALARM_DECAY = 0.999  # per frame: a raised margin halves in ~14 s
FAR_ACTIVE_DB = -60.0  # learn only while the far end's window holds more than one frame this loud
# Band energy of a frame at 0 dBFS RMS (Parseval over the half spectrum, Hann window power 0.375).
_FULL_SCALE = NFFT / 2 * FRAME_SAMPLES * 0.375


class DoubleTalkDetector:
    """`feed(near, far)`: raw microphone samples and the far end for the same span (16 kHz,
    same length, any size: cut into 20 ms frames here); True when the near end talks in any
    frame completed by this call. One thread."""

    def __init__(self, margin_db: float = MARGIN_DB, need: int = NEED, lags: int = LAGS, mu: float = MU,
                 warmup: int = WARMUP, rate: int = SAMPLE_RATE) -> None:  # fmt: skip
        self.margin_db, self.need, self.mu, self.warmup = margin_db, need, mu, warmup
        freqs = np.fft.rfftfreq(NFFT, 1.0 / rate)
        lo_hi = zip(EDGES_HZ[:-1], EDGES_HZ[1:])
        self._bands = np.array([(freqs >= lo) & (freqs < hi) for lo, hi in lo_hi], np.float64)
        self._window = np.hanning(FRAME_SAMPLES)
        nb = self._bands.shape[0]
        self._far_hist = np.zeros((lags, nb))  # newest first
        self._h = np.zeros((lags, nb))
        self._noise: np.ndarray | None = None
        self._learned = 0
        self._extra_db = 0.0  # raised by false alarms, decays
        self._near = np.zeros(0, np.float32)
        self._far = np.zeros(0, np.float32)
        self.detections = 0

    def feed(self, near: np.ndarray, far: np.ndarray) -> bool:
        self._near = np.concatenate([self._near, np.asarray(near, np.float32).reshape(-1)])
        self._far = np.concatenate([self._far, np.asarray(far, np.float32).reshape(-1)])
        talk = False
        while self._near.size >= FRAME_SAMPLES and self._far.size >= FRAME_SAMPLES:
            talk |= self._frame(self._near[:FRAME_SAMPLES], self._far[:FRAME_SAMPLES])
            self._near, self._far = self._near[FRAME_SAMPLES:], self._far[FRAME_SAMPLES:]
        return talk

    def false_alarm(self) -> None:
        self._extra_db = min(self._extra_db + FALSE_ALARM_DB, FALSE_ALARM_MAX_DB)

    def _energies(self, x: np.ndarray) -> np.ndarray:
        spectrum = np.abs(np.fft.rfft(x * self._window, NFFT)) ** 2
        return self._bands @ spectrum + 1e-10

    def _frame(self, near: np.ndarray, far: np.ndarray) -> bool:
        nb, fb = self._energies(near), self._energies(far)
        self._far_hist = np.roll(self._far_hist, 1, axis=0)
        self._far_hist[0] = fb
        # Noise floor: follows the microphone down at once, up by 1% a frame.
        self._noise = nb.copy() if self._noise is None else np.minimum(self._noise * 1.01, np.maximum(nb, self._noise * 0.9))
        self._extra_db *= FALSE_ALARM_DECAY
        predicted = (self._h * self._far_hist).sum(0)
        margin = 10.0 ** ((self.margin_db + self._extra_db) / 10.0)
        over = nb > margin * (predicted + 2.0 * self._noise)
        talk = self._learned >= self.warmup and int(over.sum()) >= self.need
        if talk:
            self.detections += 1
            return True
        if float(self._far_hist.sum()) > _FULL_SCALE * 10.0 ** (FAR_ACTIVE_DB / 10.0):
            power = (self._far_hist**2).sum(0)  # the far end played: learn the echo path
            step = self.mu * (nb - predicted) / (power + 1e-12)
            self._h = np.maximum(0.0, self._h + self._far_hist * step)
            self._learned += 1
        return False
