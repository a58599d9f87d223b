"""The real microphone: MicUnavailable where there is no input device (this machine), and the
callback → reader → frames path driven with synthetic PortAudio blocks on a patched sounddevice."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from desktop.errors import OmnideskError
from desktop.media import devices, mic
from desktop.media.clock import VirtualClock
from desktop.media.frames import FRAME_SAMPLES, SAMPLE_RATE
from desktop.media.mic import Microphone, MicUnavailable

ROOT = Path(__file__).resolve().parents[2]
NO_STATUS = SimpleNamespace(input_overflow=False)
NO_TIME = SimpleNamespace(inputBufferAdcTime=0.0, currentTime=0.0)  # ALSA often reports zeros


def test_no_input_device_here_raises_a_plain_mic_unavailable():
    found, reason = devices.input_devices()
    if found:
        pytest.skip("this machine has an input device")
    assert not mic.input_available()
    assert mic.input_problem() == reason
    with pytest.raises(MicUnavailable) as err:
        Microphone()
    assert isinstance(err.value, OmnideskError) and err.value.code == "mic_unavailable"
    assert err.value.message.startswith("No microphone found — voice input is off")
    assert "Traceback" not in err.value.message


class FakeStream:
    """Stands in for sounddevice.InputStream: keeps the callback, opens nothing."""

    last: "FakeStream | None" = None

    def __init__(self, **kw):
        self.kw, self.started, self.closed = kw, False, False
        FakeStream.last = self

    def start(self):
        self.started = True

    def abort(self):
        pass

    def close(self):
        self.closed = True


@pytest.fixture
def sd(monkeypatch):
    """sounddevice with two input devices (44.1 kHz mono, 48 kHz stereo, the default)."""
    sd = devices.import_sounddevice()
    listing = [
        {"name": "Built-in Mic", "hostapi": 0, "max_input_channels": 1, "max_output_channels": 0,
         "default_samplerate": 44100.0},
        {"name": "USB Headset", "hostapi": 0, "max_input_channels": 2, "max_output_channels": 2,
         "default_samplerate": 48000.0},
    ]  # fmt: skip
    monkeypatch.setattr(sd, "query_devices", lambda *a, **k: listing)
    monkeypatch.setattr(sd, "query_hostapis", lambda *a, **k: [{"name": "ALSA"}])
    monkeypatch.setattr(sd, "default", SimpleNamespace(device=(1, 1)))
    monkeypatch.setattr(sd, "InputStream", FakeStream)
    return sd


def test_device_chosen_by_default_index_or_name(sd):
    assert mic.input_available() and mic.input_problem() is None
    assert mic.find_input().name == "USB Headset"
    assert mic.find_input(0).name == "Built-in Mic"
    assert mic.find_input("built-in").index == 0
    with pytest.raises(MicUnavailable, match="'Webcam' not found"):
        mic.find_input("Webcam")


def test_stream_opens_at_the_device_rate_with_fixed_blocks(sd):
    m = Microphone("headset", clock=VirtualClock())
    m.start()
    try:
        kw = FakeStream.last.kw
        got = (kw["samplerate"], kw["channels"], kw["blocksize"], kw["dtype"])
        assert got == (48000, 2, 960, "float32")
        assert kw["device"] == 1 and FakeStream.last.started
    finally:
        m.close()
    assert FakeStream.last.closed


def test_stream_that_will_not_open_is_mic_unavailable(sd, monkeypatch):
    def refuse(**kw):
        raise sd.PortAudioError("Device unavailable")

    monkeypatch.setattr(sd, "InputStream", refuse)
    with pytest.raises(MicUnavailable, match="could not be opened"):
        Microphone(clock=VirtualClock()).start()


def drive(m: Microphone, clock: VirtualClock, signal: np.ndarray, time_info=NO_TIME) -> None:
    """Feed `signal` (frames × channels at the device rate) through the callback block by block,
    the clock moving one block per call as a device's would."""
    for i in range(0, len(signal) - m.block_frames + 1, m.block_frames):
        clock.advance(m.block_frames / m.device_rate)
        m._callback(signal[i : i + m.block_frames], m.block_frames, time_info, NO_STATUS)


def test_stereo_48k_blocks_become_16k_mono_frames_at_the_same_frequency(sd):
    clock = VirtualClock(start=100.0)
    m = Microphone(clock=clock)
    t = np.arange(48000) / 48000
    left = 0.5 * np.sin(2 * np.pi * 1000 * t)
    sig = np.stack([left, np.zeros_like(left)], axis=1).astype(np.float32)  # mono mix halves it
    drive(m, clock, sig)
    m.process()
    f = m.read()
    assert f.samples.shape[1] == FRAME_SAMPLES and 47 <= len(f) <= 50  # the resampler lags < 3
    x = f.audio()[1600:]  # skip the filter's start
    spec = np.abs(np.fft.rfft(x * np.hanning(x.size)))
    peak_hz = np.argmax(spec) * SAMPLE_RATE / x.size
    assert abs(peak_hz - 1000) < SAMPLE_RATE / x.size
    assert np.median(f.levels[5:]) == pytest.approx(20 * np.log10(0.25 / np.sqrt(2)), abs=0.3)
    # the first block was captured during [100.00, 100.02): frames are stamped on that timeline
    assert f.times[0] == pytest.approx(100.0, abs=1e-9)
    assert np.allclose(np.diff(f.times), 0.02, atol=1e-9)


def test_adc_time_from_portaudio_stamps_the_blocks(sd):
    clock = VirtualClock(start=5.0)
    m = Microphone(clock=clock)
    late = SimpleNamespace(inputBufferAdcTime=1.000, currentTime=1.030)  # first sample 30 ms old
    drive(m, clock, np.zeros((960 * 3, 2), np.float32), late)
    m.process()
    assert m.read().times[0] == pytest.approx(5.02 - 0.03, abs=1e-9)


def test_stalled_reader_thread_loses_whole_blocks_counted(sd):
    clock = VirtualClock()
    m = Microphone(clock=clock, raw_blocks=8)
    drive(m, clock, np.zeros((960 * 13, 2), np.float32))  # nobody runs process()
    assert m.lost_blocks == 5 and m.overflows == 5
    m._callback(np.zeros((960, 2), np.float32), 960, NO_TIME, SimpleNamespace(input_overflow=True))
    assert m.device_overflows == 1 and m.stats()["device_overflows"] == 1
    m.process()
    assert len(m.read()) >= 7  # the 8 kept blocks: 160 ms, less the resampler's lag


def test_reader_thread_turns_callback_blocks_into_frames(sd):
    clock = VirtualClock()
    m = Microphone("Built-in", clock=clock)  # 44.1 kHz mono
    m.start()
    try:
        drive(m, clock, np.full((882 * 10, 1), 0.1, np.float32))
        got = 0
        for _ in range(50):
            got += len(m.read(timeout=0.1))
            if got >= 8:
                break
        assert got >= 8
        assert m.level_db == pytest.approx(-20.0, abs=0.5)
    finally:
        m.close()


SMOKE = textwrap.dedent(
    """
    import time
    from desktop.media.mic import Microphone, MicUnavailable
    try:
        m = Microphone(); m.start()
    except MicUnavailable as exc:
        print("UNAVAILABLE", exc.message); raise SystemExit(0)
    deadline, got = time.monotonic() + 3, 0
    while got < 10 and time.monotonic() < deadline:
        got += len(m.read(timeout=0.1))
    m.close()
    print("FRAMES", got, m.device_rate)
    """
)


def test_microphone_opens_and_frames_on_the_alsa_null_device(tmp_path):
    """Smoke only: the null device is not paced in real time and its input is garbage."""
    conf = tmp_path / "asound.conf"
    conf.write_text("pcm.!default { type null }\nctl.!default { type hw card 0 }\n")
    env = {**os.environ, "ALSA_CONFIG_PATH": str(conf)}
    res = subprocess.run([sys.executable, "-c", SMOKE], env=env, capture_output=True, text=True,
                         timeout=60, cwd=ROOT)  # fmt: skip
    assert res.returncode == 0, res.stderr
    if "UNAVAILABLE" in res.stdout:
        pytest.skip(f"ALSA null device does not open here: {res.stdout.strip()}")
    frames, rate = res.stdout.split()[1:]
    assert int(frames) >= 10 and int(rate) > 0
