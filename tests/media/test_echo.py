"""Echo cancellation on the virtual clock with real (espeak) speech: the fake speaker plays the
assistant, a room sends it back into the microphone (delay, gain, reflections, noise), and the
canceller removes it while the user's voice on top survives. Measured figures are in comments."""

import functools
from dataclasses import dataclass

import numpy as np
import pytest
import soxr

from desktop.media.clock import VirtualClock
from desktop.media.echo import AEC_LAG, BLOCK, NS_LAG, EchoCanceller, EchoConfig
from desktop.media.fake_audio import FakeAudioOutput
from desktop.media.far_end import FarEndReference
from desktop.media.frames import FRAME_S, FRAME_SAMPLES, SAMPLE_RATE
from desktop.model.tts import EspeakTTS

pytestmark = pytest.mark.speech_model
ASSISTANT = ("Hello, I am the assistant. The weather today is sunny with a light breeze from "
             "the west, and tomorrow it will rain in the afternoon.")  # fmt: skip
USER = "Stop, please tell me about the train times instead."
USER_AT = 2.5  # s after the speaker starts: the canceller has converged by then
T0 = 100.0


@functools.cache
def say(text: str, voice: str = "en-us", wpm: int = 175, rate: int | None = None) -> np.ndarray:
    tts = EspeakTTS(voice, rate_wpm=wpm)
    audio = np.concatenate([np.asarray(c, np.float32).reshape(-1) for c in tts.synthesize(text)])
    return audio if rate is None else soxr.resample(audio, tts.sample_rate, rate).astype(np.float32)


def user_voice() -> np.ndarray:
    return say(USER, "en-gb-x-rp", 150, SAMPLE_RATE)  # another voice, another sentence


@dataclass
class Call:
    mic: np.ndarray  # what the microphone heard (16 kHz)
    out: np.ndarray  # what the canceller gave back, frame by frame
    echo: np.ndarray  # the speaker's part of `mic`
    user: np.ndarray  # the user's part of `mic`
    aec: EchoCanceller


def call(delay_ms: float, gain: float, *, user: np.ndarray | None = None,
         config: EchoConfig | None = None, reference: bool = True, frame: int = FRAME_SAMPLES,
         seconds: float = 6.0, seed: int = 0) -> Call:  # fmt: skip
    """The speaker (48 kHz) plays the assistant's sentence from T0. The room: what it played,
    resampled with another filter than the reference's (soxr HQ), `delay_ms` later, times
    `gain`, plus two reflections and noise at -50 dBFS. Each microphone frame reaches the
    canceller 20 ms after it ends, as the real microphone's resampler delivers it."""
    clock = VirtualClock(start=T0)
    speaker = FakeAudioOutput(clock, device_rate=48000, high_water_ms=20000)
    far = FarEndReference.tap(speaker) if reference else None
    aec = EchoCanceller(far, config=config)
    speaker.start()
    speaker.write("reply", say(ASSISTANT), EspeakTTS().sample_rate)
    speaker.end("reply")
    n = int(seconds * SAMPLE_RATE) // frame * frame
    d = int(delay_ms * SAMPLE_RATE / 1000)
    path = np.zeros(d + 400, np.float32)  # echo path: direct sound and two reflections
    path[[d, d + 112, d + 304]] = gain * np.array([1.0, 0.4, 0.2], np.float32)
    user_part = np.zeros(n, np.float32)
    if user is not None:
        s = int(USER_AT * SAMPLE_RATE)
        user_part[s : s + user.size] = user[: n - s]
    noise = np.random.default_rng(seed).normal(0, 0.003, n).astype(np.float32)
    room = soxr.ResampleStream(48000, SAMPLE_RATE, 1, dtype="float32", quality="HQ")
    heard, taken = np.zeros(0, np.float32), 0
    echo, out = np.zeros(n, np.float32), np.zeros(n, np.float32)
    k, step = 0, frame / SAMPLE_RATE
    while k < n:
        clock.advance(FRAME_S)
        speaker.pump()
        new = speaker.blocks()[taken:]
        taken += len(new)
        if new:
            heard = np.concatenate([heard, room.resample_chunk(np.concatenate(new))])
        while k < n and T0 + k / SAMPLE_RATE + step + 0.02 <= clock.now() + 1e-9:
            lo = max(0, k - path.size + 1)
            echo[k : k + frame] = np.convolve(heard[lo : k + frame], path)[k - lo : k - lo + frame]
            near = echo[k : k + frame] + user_part[k : k + frame] + noise[k : k + frame]
            out[k : k + frame] = aec.process(near, T0 + k / SAMPLE_RATE)
            k += frame
    return Call(echo + user_part + noise, out, echo, user_part, aec)


def db(a: np.ndarray, b: np.ndarray) -> float:
    """10·log10 of the energy of a over that of b."""
    return 10 * np.log10(np.sum(np.square(a, dtype=np.float64))
                         / np.sum(np.square(b, dtype=np.float64)))


def envelope_corr(a: np.ndarray, b: np.ndarray) -> float:
    """Correlation of the 20 ms log-energy envelopes: does `a` rise and fall with speech `b`?"""
    k = min(a.size, b.size) // FRAME_SAMPLES

    def env(x: np.ndarray) -> np.ndarray:
        frames = x[: k * FRAME_SAMPLES].reshape(k, -1).astype(np.float64)
        return np.log10(np.square(frames).mean(1) + 1e-8)

    return float(np.corrcoef(env(a), env(b))[0, 1])


# Echo reduction from 0.5 s on (the first 250 ms already reach ~40 dB), measured: with noise
# suppression 30-38 dB (the 30 ms / 0.3 room is the hardest), AEC alone 18-26 dB. The thresholds
# leave ~5 dB of margin; a misaligned or missing reference stays below 3 dB (tests below).
@pytest.mark.parametrize("delay_ms, gain", [(30, 0.3), (50, 0.5), (80, 0.6)])
@pytest.mark.parametrize("ns, min_db", [(True, 25.0), (False, 13.0)])
def test_echo_alone_is_cancelled(delay_ms, gain, ns, min_db):
    c = call(delay_ms, gain, config=EchoConfig(noise_suppression=ns))
    after = slice(SAMPLE_RATE // 2, None)
    reduction = db(c.echo[after], c.out[after])
    assert reduction >= min_db
    stats = c.aec.stats()
    assert stats["far_late_blocks"] == 0  # the reference was always there in time
    assert stats["far_active_blocks"] > 400  # ~4.5 s of speech
    assert stats["erle_db"] == pytest.approx(db(c.mic, c.out), abs=3.0)  # ~ the same figure


@pytest.mark.parametrize("how", ["reference 100 ms late", "no reference"])
def test_without_an_aligned_reference_the_echo_stays(how):
    # The canceller needs the far end no later than the echo: read 100 ms early (a system delay
    # set larger than the real one) the far end lags the echo and nothing is cancelled; without
    # a reference only noise suppression acts, which leaves speech alone.
    config = EchoConfig(delay_ms=100) if how.startswith("reference") else None
    c = call(50, 0.5, config=config, reference=how.startswith("reference"))
    assert db(c.echo[SAMPLE_RATE // 2 :], c.out[SAMPLE_RATE // 2 :]) < 6.0  # measured 1.4 / ~0.5


def test_a_configured_system_delay_below_the_real_one_still_cancels():
    c = call(80, 0.5, config=EchoConfig(delay_ms=40))  # measured 36 dB
    assert db(c.echo[SAMPLE_RATE // 2 :], c.out[SAMPLE_RATE // 2 :]) >= 25.0


def test_user_speech_survives_double_talk():
    user = 0.5 * user_voice()  # as loud as the echo (-0.9 dB against it)
    c = call(50, 0.5, user=user, seconds=8.0)
    s = int(USER_AT * SAMPLE_RATE)
    span, lag = slice(s, s + user.size), AEC_LAG + NS_LAG
    clean, mic, out = c.user[span], c.mic[span], c.out[s + lag : s + lag + user.size]
    # Measured: envelope correlation 0.52 in the microphone, 0.72 after the canceller; waveform
    # correlation 0.73; the user's energy comes through 3.3 dB down (AEC3 turns its suppressor
    # down in double talk but not off).
    assert envelope_corr(out, clean) >= 0.62
    assert envelope_corr(out, clean) >= envelope_corr(mic, clean) + 0.1
    assert float(np.dot(out, clean) / np.sqrt(np.dot(out, out) * np.dot(clean, clean))) >= 0.6
    assert db(out, clean) >= -6.0
    # and the echo is cancelled again once the user stops (measured 29.6 dB half a second on)
    rest = slice(s + user.size + SAMPLE_RATE // 2, None)
    assert db(c.echo[rest], c.out[rest]) >= 20.0


@pytest.mark.parametrize("frame", [480, 250, 100])
def test_any_frame_size_gives_the_same_audio(frame):
    ref = call(50, 0.5, seconds=2.0)
    other = call(50, 0.5, seconds=2.0, frame=frame)
    carried = {480: 0, 250: 150, 100: 140}[frame]  # the most each size leaves pending
    n = other.out.size
    want = np.concatenate([np.zeros(carried, np.float32), ref.out])[:n]
    np.testing.assert_allclose(other.out[: min(n, ref.out.size)], want[: min(n, ref.out.size)],
                               atol=1e-5)  # fmt: skip
    assert other.aec.lag_s == pytest.approx(ref.aec.lag_s + carried / SAMPLE_RATE)
    assert other.aec.gaps == 0


def test_with_nothing_played_speech_passes_delayed_by_the_stated_lag():
    aec = EchoCanceller(None)
    speech = np.concatenate([np.zeros(4000, np.float32), 0.5 * user_voice()])
    starts = range(0, speech.size - FRAME_SAMPLES + 1, FRAME_SAMPLES)
    out = np.concatenate([aec.process(speech[i : i + FRAME_SAMPLES], T0 + i / SAMPLE_RATE)
                          for i in starts])  # fmt: skip
    lag = round(aec.lag_s * SAMPLE_RATE)
    assert lag == AEC_LAG + NS_LAG
    shifted = out[lag:]
    clean = speech[: shifted.size]
    corr = np.dot(shifted, clean) / np.sqrt(np.dot(shifted, shifted) * np.dot(clean, clean))
    assert corr >= 0.9  # measured 0.95: the high-pass filter and noise suppression
    assert abs(db(shifted, clean)) < 2.0
    assert aec.stats()["far_active_blocks"] == 0 and aec.stats()["far_late_blocks"] == 0


def test_reset_forgets_the_echo_path_and_the_stats():
    c = call(50, 0.5, seconds=2.0)
    assert c.aec.stats()["far_active_blocks"] > 0
    c.aec.reset()
    assert c.aec.stats()["blocks"] == 0 and c.aec.stats()["far_active_blocks"] == 0


def test_config_is_validated():
    with pytest.raises(ValueError):
        EchoConfig(delay_ms=-1)
    with pytest.raises(ValueError):
        EchoConfig(ns_level=4)
    with pytest.raises(ValueError):
        EchoCanceller(None, rate=48000)
