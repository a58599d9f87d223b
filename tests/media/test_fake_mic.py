"""The fake microphone on a virtual clock: frame size and stamps, resampling, queued audio, files
and TTS speech, overflow with a slow reader, a background thread, and the speaker loopback."""

import numpy as np
import pytest
import soundfile
import soxr

from desktop.media.clock import VirtualClock
from desktop.media.fake_audio import FakeAudioOutput
from desktop.media.fake_mic import FakeMicrophone
from desktop.media.frames import FRAME_SAMPLES, SAMPLE_RATE, SILENCE_DB


def tone(seconds: float, rate: int, freq: float, amp: float = 0.5) -> np.ndarray:
    t = np.arange(int(round(seconds * rate))) / rate
    return (amp * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def peak_hz(x: np.ndarray) -> float:
    spec = np.abs(np.fft.rfft(x * np.hanning(x.size)))
    return float(np.argmax(spec)) * SAMPLE_RATE / x.size


def mic_at(start: float = 0.0, **kw) -> tuple[VirtualClock, FakeMicrophone]:
    clock = VirtualClock(start=start)
    m = FakeMicrophone(clock, **kw)
    m.start()
    return clock, m


def test_frames_are_20ms_and_stamped_on_the_clock():
    clock, m = mic_at(start=7.0)
    clock.advance(1.0)
    n = m.pump()
    f = m.read()
    assert len(f) == n and 48 <= n <= 50  # 50 blocks captured; the resampler holds back < 3 frames
    assert f.samples.shape == (n, FRAME_SAMPLES) == (n, 0.020 * SAMPLE_RATE)
    assert np.allclose(f.times, 7.0 + 0.02 * np.arange(n), atol=1e-9)
    assert (f.levels == SILENCE_DB).all()
    assert m.pump() == 0  # nothing new until the clock moves
    clock.advance(0.02)
    assert m.pump() >= 1 and m.read().times[0] == pytest.approx(7.0 + 0.02 * n)


@pytest.mark.parametrize("device_rate", [48000, 44100, 16000])
def test_device_rate_audio_reaches_16k_frames_at_its_frequency_and_time(device_rate):
    clock, m = mic_at(device_rate=device_rate)
    at = m.play(tone(1.0, device_rate, 1234.0), device_rate, at=0.5)
    clock.advance(2.0)
    m.pump()
    f = m.read()
    x = f.audio()
    onset = f.times[0] + np.argmax(np.abs(x) > 0.25) / SAMPLE_RATE
    assert onset == pytest.approx(at, abs=0.001)  # the stamps agree with the audio
    voiced = x[int(0.6 * SAMPLE_RATE) : int(1.4 * SAMPLE_RATE)]
    assert abs(peak_hz(voiced) - 1234.0) <= SAMPLE_RATE / voiced.size
    assert np.median(f.levels[30:70]) == pytest.approx(-9.03, abs=0.2)  # 0.5 sine
    assert (f.levels[80:] < -60).all()  # silence after it


def test_content_above_8khz_is_filtered_not_aliased():
    clock, m = mic_at(device_rate=48000)
    m.play(tone(1.0, 48000, 12000.0), 48000)  # would alias to 4 kHz
    clock.advance(1.0)
    m.pump()
    assert np.median(m.read().levels[5:40]) < -9.03 - 40


def test_queued_audio_plays_back_to_back_with_silence_where_told():
    clock, m = mic_at()
    a = m.play(tone(0.2, 22050, 500.0), 22050)
    b = m.play(tone(0.2, 16000, 900.0), 16000)
    c = m.play(tone(0.1, 8000, 300.0), 8000, at=1.0, gain=0.5)
    assert (a, b, c) == (0.0, pytest.approx(0.2), 1.0) and m.end_time() == pytest.approx(1.1)
    clock.advance(1.5)
    m.pump()
    f = m.read()
    lv = dict(zip(np.round(f.times, 2), f.levels))
    assert lv[0.1] > -10 and lv[0.3] > -10 and lv[1.04] == pytest.approx(-15.05, abs=0.3)
    assert lv[0.6] < -90 and lv[1.3] < -90


def test_plays_an_audio_file(tmp_path):
    path = tmp_path / "stereo.wav"
    stereo = np.stack([tone(0.6, 44100, 700.0), tone(0.6, 44100, 700.0)], axis=1)
    soundfile.write(path, stereo, 44100)
    clock, m = mic_at()
    at = m.play_file(path, at=0.2)
    assert m.end_time() == pytest.approx(0.8)
    clock.advance(1.0)
    m.pump()
    f = m.read()
    x = f.audio()[int((at + 0.05) * SAMPLE_RATE) : int(0.75 * SAMPLE_RATE)]
    assert abs(peak_hz(x) - 700.0) <= SAMPLE_RATE / x.size
    assert f.levels[int(0.9 / 0.02) - 1] < -60


def test_generated_speech_has_speech_levels_and_pauses():
    from desktop.model.tts import EspeakTTS

    tts = EspeakTTS()
    clock, m = mic_at()
    first = m.say(tts, "Hello there, how are you?", at=0.3)
    end = m.end_time()
    m.say(tts, "Fine thanks.", at=end + 0.8)
    clock.advance(m.end_time() + 0.3)
    m.pump()
    f = m.read()
    loud = f.times[f.levels > -40]
    assert loud[0] == pytest.approx(first, abs=0.1) and loud[-1] <= m.end_time()
    gap = (f.times > end + 0.05) & (f.times < end + 0.75)
    assert gap.sum() >= 30 and (f.levels[gap] == SILENCE_DB).all()


def test_slow_reader_loses_oldest_frames_counted():
    clock, m = mic_at(capacity_s=0.2)  # 10 frames
    clock.advance(1.0)
    made = m.pump()
    f = m.read()
    assert len(f) == 9 and m.overflows == made - 9
    assert f.times[-1] == pytest.approx(0.02 * (made - 1))  # the newest were kept


def test_background_thread_captures_as_the_clock_moves():
    clock, m = mic_at()
    m.start(thread=True)
    try:
        got = 0
        for _ in range(25):
            assert clock.wait_for_sleepers(1, timeout=2.0)
            clock.step()
            got += len(m.read(timeout=0.5))
        assert got >= 20
    finally:
        thread = m._thread
        m.close()
        clock.step()  # a thread asleep on a manual clock wakes only when the clock moves
        thread.join(timeout=2.0)
    assert not thread.is_alive()


@pytest.mark.parametrize("speaker_rate", [48000, 24000])
def test_loopback_hears_the_speaker_delayed_and_scaled(speaker_rate):
    from desktop.model.tts import EspeakTTS

    tts = EspeakTTS()
    clock = VirtualClock()
    spk = FakeAudioOutput(clock, device_rate=speaker_rate, pre_roll_ms=0)
    m = FakeMicrophone(clock)
    m.loopback(spk, delay_ms=37.0, gain=0.3)
    spk.start()
    m.start()
    for chunk in tts.synthesize("The quick brown fox jumps over the lazy dog."):
        spk.write("r", chunk, tts.sample_rate)
    spk.end("r")
    for _ in range(200):  # 4 s; only the microphone is pumped: it pulls the speaker's due blocks
        clock.advance(0.02)
        m.pump()
    f = m.read()
    heard = f.audio()
    ref = soxr.resample(spk.played(), speaker_rate, SAMPLE_RATE)  # speaker timeline from t = 0
    assert f.times[0] == 0.0 and np.abs(ref).max() > 0.1
    n = min(heard.size, ref.size)
    corr = np.correlate(heard[:n], ref[: n - 1200], mode="valid")  # lags 0 … 1200 samples
    lag = int(np.argmax(corr))
    assert lag == pytest.approx(0.037 * SAMPLE_RATE, abs=1)
    seg = ref[: n - lag]
    gain = np.dot(heard[lag:n], seg) / np.dot(seg, seg)
    assert gain == pytest.approx(0.3, abs=0.01)
