"""Silero VAD on real (espeak) speech: start and end of a sentence within 100 ms of where it was
put, nothing from silence or low noise, two turns, the configurable knobs, reset, cost per chunk."""

import time

import numpy as np
import pytest
import soxr

from desktop.media.frames import FRAME_SAMPLES, SAMPLE_RATE, Frames, level_db
from desktop.media.vad import CHUNK, SileroVAD, SpeechEnd, SpeechStart, VadConfig
from desktop.model.tts import EspeakTTS

pytestmark = pytest.mark.speech_model
T0 = 1000.0  # clock time of the first sample: events must come back on the caller's clock


def say(text: str, voice: str = "en-us") -> np.ndarray:
    tts = EspeakTTS(voice)
    audio = np.concatenate(list(tts.synthesize(text)))
    return soxr.resample(audio, tts.sample_rate, SAMPLE_RATE).astype(np.float32)


def voiced_bounds(speech: np.ndarray) -> tuple[float, float]:
    """Seconds of the first and last sample above -40 dBFS: where the speech really is."""
    loud = np.flatnonzero(np.abs(speech) > 0.01)
    return loud[0] / SAMPLE_RATE, (loud[-1] + 1) / SAMPLE_RATE


def scene(*parts: np.ndarray | float, noise: float = 0.003, seed: int = 0) -> np.ndarray:
    """Speech clips and silences (float seconds) in a row, over white noise of rms `noise`."""
    pieces = [np.zeros(int(p * SAMPLE_RATE), np.float32) if isinstance(p, float) else p for p in parts]
    sig = np.concatenate(pieces)
    pad = (-sig.size) % FRAME_SAMPLES
    sig = np.concatenate([sig, np.zeros(pad, np.float32)])
    return sig + np.random.default_rng(seed).normal(0, noise, sig.size).astype(np.float32)


def run(vad: SileroVAD, sig: np.ndarray) -> list:
    """Feed 20 ms frames stamped like the microphone's; return every event."""
    events = []
    for i in range(0, sig.size, FRAME_SAMPLES):
        events += vad.process(sig[i : i + FRAME_SAMPLES], T0 + i / SAMPLE_RATE)
    return events


@pytest.fixture(scope="module")
def sentence() -> np.ndarray:
    return say("The quick brown fox jumps over the lazy dog.")


@pytest.mark.parametrize("voice", ["en-us", "en-us+f3"])
def test_start_and_end_within_100_ms_of_the_speech(voice):
    speech = say("Hello there. Could you tell me the time, please?", voice)
    lead = 1.37  # not a multiple of the 32 ms chunk
    on, off = voiced_bounds(speech)
    vad = SileroVAD()
    events = run(vad, scene(lead, speech, 1.5))
    assert [type(e) for e in events] == [SpeechStart, SpeechEnd]  # the pause after "there" stays inside
    start, end = events
    assert start.t == pytest.approx(T0 + lead + on, abs=0.1)
    assert end.t == pytest.approx(T0 + lead + off, abs=0.1)
    assert end.start == start.t
    assert 0 < start.at - start.t <= 0.2  # decided soon after onset
    assert end.at - end.t == pytest.approx(0.6, abs=CHUNK / SAMPLE_RATE + 1e-6)  # default end silence
    assert not vad.in_speech


@pytest.mark.parametrize("name", ["digital silence", "noise -50 dBFS", "noise -40 dBFS", "hum 50 Hz"])
def test_silence_and_low_noise_are_not_speech(name):
    n = 4 * SAMPLE_RATE
    rng = np.random.default_rng(1)
    sig = {
        "digital silence": np.zeros(n, np.float32),
        "noise -50 dBFS": rng.normal(0, 10 ** (-50 / 20), n).astype(np.float32),
        "noise -40 dBFS": rng.normal(0, 10 ** (-40 / 20), n).astype(np.float32),
        "hum 50 Hz": (0.02 * np.sin(2 * np.pi * 50 * np.arange(n) / SAMPLE_RATE)).astype(np.float32),
    }[name]
    vad = SileroVAD()
    probs = []
    for i in range(0, n, FRAME_SAMPLES):
        assert vad.process(sig[i : i + FRAME_SAMPLES], T0 + i / SAMPLE_RATE) == []
        probs.append(vad.prob)
    assert vad.chunks == n // CHUNK
    assert max(probs) < 0.5 and not vad.in_speech


def test_two_turns_and_frames_input(sentence):
    sig = scene(0.5, sentence, 1.2, sentence, 1.0)
    frames = Frames(
        sig.reshape(-1, FRAME_SAMPLES),
        T0 + np.arange(sig.size // FRAME_SAMPLES) * FRAME_SAMPLES / SAMPLE_RATE,
        np.array([level_db(f) for f in sig.reshape(-1, FRAME_SAMPLES)], np.float32),
    )
    events = SileroVAD().process_frames(frames)
    assert [type(e) for e in events] == [SpeechStart, SpeechEnd, SpeechStart, SpeechEnd]
    on, off = voiced_bounds(sentence)
    second = 0.5 + sentence.size / SAMPLE_RATE + 1.2
    assert events[2].t == pytest.approx(T0 + second + on, abs=0.1)
    assert events[3].t == pytest.approx(T0 + second + off, abs=0.1)


def test_end_silence_and_min_speech_are_configurable(sentence):
    sig = scene(0.5, sentence, 1.5)
    short = run(SileroVAD(VadConfig(end_silence_ms=300)), sig)
    assert [type(e) for e in short] == [SpeechStart, SpeechEnd]
    assert short[1].at - short[1].t == pytest.approx(0.3, abs=CHUNK / SAMPLE_RATE + 1e-6)
    # Speech shorter than min_speech_ms never starts a turn.
    assert run(SileroVAD(VadConfig(min_speech_ms=5000)), sig) == []
    # A threshold above every chunk's probability hears nothing.
    vad = SileroVAD()
    peak = 0.0
    for i in range(0, sig.size, FRAME_SAMPLES):
        vad.process(sig[i : i + FRAME_SAMPLES], T0 + i / SAMPLE_RATE)
        peak = max(peak, vad.prob)
    assert 0.5 < peak < 1.0
    assert run(SileroVAD(VadConfig(threshold=peak + (1 - peak) / 2)), sig) == []


def test_reset_forgets_speech_in_progress(sentence):
    vad = SileroVAD()
    run(vad, scene(0.3, sentence[: sentence.size // 2]))
    assert vad.in_speech and vad.voiced
    vad.reset()
    assert not vad.in_speech and vad.prob == 0.0
    assert run(vad, scene(2.0)) == []  # no SpeechEnd for the forgotten speech


def test_cost_per_chunk_is_bounded(sentence):
    vad = SileroVAD()
    sig = scene(0.2, sentence, 0.2)
    t0 = time.perf_counter()
    run(vad, sig)
    ms = (time.perf_counter() - t0) * 1000 / vad.chunks
    assert ms < 3.0, f"{ms:.2f} ms per 32 ms chunk"  # measured ≈0.13 ms on this machine


def test_config_is_validated():
    with pytest.raises(ValueError):
        VadConfig(threshold=1.5)
    with pytest.raises(ValueError):
        VadConfig(threshold=0.5, neg_threshold=0.7)
    with pytest.raises(ValueError):
        VadConfig(end_silence_ms=0)
    assert VadConfig(threshold=0.6).off_threshold == pytest.approx(0.45)
