"""Speaker sinks: the fake device on a virtual clock (rate, resampling, backpressure, flush,
underruns, first audio) and a smoke test of the real SpeakerOutput."""

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import soxr

from desktop.media import devices
from desktop.media.audio_out import AudioUnavailable, SpeakerOutput
from desktop.media.clock import VirtualClock
from desktop.media.fake_audio import FakeAudioOutput

ROOT = Path(__file__).resolve().parents[2]
RATE = 48000
BLOCK = 960  # 20 ms at 48 kHz


def tone(seconds: float, rate: int, freq: float = 440.0, amp: float = 0.5) -> np.ndarray:
    t = np.arange(int(round(seconds * rate))) / rate
    return (amp * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def fake(**kw) -> FakeAudioOutput:
    out = FakeAudioOutput(VirtualClock(), device_rate=RATE, **kw)
    out.start()
    return out


def test_plays_block_by_block_at_the_device_rate():
    out = fake(pre_roll_ms=0)
    audio = tone(0.5, RATE)
    out.write("r", audio, RATE)
    out.end("r")
    assert out.pump(until=0.999) == 50  # blocks at 0.00, 0.02, … 0.98
    played = out.played()
    assert played.size == 50 * BLOCK
    assert np.array_equal(played[: audio.size], audio) and not played[audio.size :].any()
    s = out.stats()
    assert s["played_s"] == pytest.approx(0.5) and s["underruns"] == 0 and s["device_rate"] == RATE


def test_resamples_22050_to_48000_in_chunks_without_seams():
    out = fake()
    src = tone(1.0, 22050)
    for i in range(0, src.size, 2205):  # espeak-sized chunks
        out.write("r", src[i : i + 2205], 22050)
    out.end("r")
    out.pump_blocks(60)
    played = out.played()
    n = int(out.stats()["played_s"] * RATE)
    assert abs(n - RATE) <= BLOCK
    whole = soxr.resample(src, 22050, RATE)  # one-shot reference: chunk joins must not differ
    m = min(n, whole.size)
    assert np.max(np.abs(played[:m] - whole[:m])) < 1e-3
    assert out.stats()["underruns"] == 0


def test_pre_roll_then_underrun_counted_until_end():
    out = fake(pre_roll_ms=100)
    out.write("r", tone(0.06, RATE), RATE)
    out.pump_blocks(3)
    assert out.stats()["played_s"] == 0  # waiting for pre-roll
    out.write("r", tone(0.06, RATE), RATE)
    out.pump_blocks(7)  # 120 ms buffered → plays 6 blocks, the 7th runs dry
    assert out.stats()["underruns"] == 1
    out.write("r", tone(0.02, RATE), RATE)
    out.end("r")  # the short tail plays without pre-roll, its end is no underrun
    out.pump_blocks(3)
    assert out.stats()["underruns"] == 1
    assert out.stats()["played_s"] == pytest.approx(0.14)


def test_flush_mid_request_silences_the_next_block_and_drops_later_writes():
    out = fake(pre_roll_ms=0)
    out.write("r", tone(1.0, RATE), RATE)
    out.pump_blocks(5)
    assert np.abs(out.blocks()[-1]).max() > 0.1
    out.flush("r")
    out.pump_blocks(1)
    assert not out.blocks()[-1].any()
    out.write("r", tone(0.5, RATE), RATE)  # a late chunk of the cancelled request
    out.pump_blocks(5)
    assert not out.played()[5 * BLOCK :].any()
    assert out.heard_s("r") == pytest.approx(0.1)
    assert out.stats()["underruns"] == 0


def test_flush_one_request_keeps_the_next_one():
    out = fake(pre_roll_ms=0)
    out.write("a", tone(0.2, RATE), RATE)
    out.end("a")
    out.write("b", tone(0.1, RATE, amp=0.25), RATE)
    out.end("b")
    out.pump_blocks(2)
    out.flush("a")
    out.pump_blocks(6)
    after = out.played()[2 * BLOCK :]
    assert np.array_equal(after[: int(0.1 * RATE)], tone(0.1, RATE, amp=0.25))
    assert out.stats()["underruns"] == 0


def test_backpressure_blocks_the_writer_until_drained():
    out = fake(pre_roll_ms=0, high_water_ms=200, capacity_s=1.0)
    done = threading.Event()

    def writer():
        for _ in range(4):
            out.write("r", tone(0.3, RATE), RATE)
        done.set()

    threading.Thread(target=writer, daemon=True).start()
    assert not done.wait(0.2)  # 0.3 s is above the 0.2 s high-water mark: second write waits
    assert out.stats()["buffered_ms"] == pytest.approx(300)
    while not done.is_set():
        out.pump_blocks(5)
        time.sleep(0.002)
    assert out.stats()["buffered_ms"] <= 200 + 300
    assert out.stats()["dropped_s"] == 0


def test_flush_releases_a_blocked_writer():
    out = fake(pre_roll_ms=0, high_water_ms=100)
    returned = threading.Event()
    out.write("r", tone(0.3, RATE), RATE)
    t = threading.Thread(target=lambda: (out.write("r", tone(0.3, RATE), RATE), returned.set()))
    t.start()
    assert not returned.wait(0.05)
    out.flush()
    assert returned.wait(1.0)


def test_first_audio_at_is_the_clock_time_of_the_first_audible_sample():
    clock = VirtualClock()
    out = FakeAudioOutput(clock, device_rate=RATE, pre_roll_ms=0)
    clock.advance(10.0)
    out.start()
    lead = np.zeros(int(0.05 * RATE), np.float32)  # 50 ms of silence before the voice
    out.write("r", np.concatenate([lead, tone(0.1, RATE)]), RATE)
    out.end("r")
    out.pump(until=10.2)
    assert out.first_audio_at("r") == pytest.approx(10.05, abs=1 / RATE)
    assert out.stats()["first_audio_at"] == out.first_audio_at("r")


def test_volume_scales_output():
    out = fake(pre_roll_ms=0, volume=0.5)
    out.write("r", np.full(BLOCK, 0.8, np.float32), RATE)
    out.pump_blocks(1)
    assert np.allclose(out.blocks()[0], 0.4)


def test_background_thread_plays_as_the_virtual_clock_moves():
    clock = VirtualClock()
    out = FakeAudioOutput(clock, device_rate=RATE, pre_roll_ms=0)
    out.write("r", tone(0.5, RATE), RATE)
    out.end("r")
    out.start(thread=True)
    assert clock.wait_for_sleepers(1)
    assert out.stats()["played_s"] == pytest.approx(0.02)  # the block due at t=0
    clock.advance(0.2)
    deadline = time.monotonic() + 2.0
    while out.stats()["played_s"] < 0.22 - 1e-9 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert out.stats()["played_s"] == pytest.approx(0.22)
    out.close()


def test_background_thread_on_the_real_clock():
    out = FakeAudioOutput(device_rate=RATE, block_ms=10)  # default clock: RealClock
    out.start(thread=True)
    out.write("r", tone(0.05, RATE), RATE)
    out.end("r")
    deadline = time.monotonic() + 2.0
    while out.stats()["played_s"] < 0.05 and time.monotonic() < deadline:
        time.sleep(0.01)
    out.close()
    assert out.stats()["played_s"] == pytest.approx(0.05)


def test_speaker_without_device_says_audio_is_off(monkeypatch):
    sd = devices.import_sounddevice()
    monkeypatch.setattr(sd, "query_devices", lambda *a, **k: [])
    with pytest.raises(AudioUnavailable) as err:
        SpeakerOutput()
    assert err.value.code == "audio_unavailable"
    assert err.value.message == "No sound output device found — audio is off"
    assert devices.output_devices() == ([], "No sound output device found — audio is off")


SMOKE = textwrap.dedent(
    """
    import time, numpy as np
    from desktop.media.audio_out import SpeakerOutput, AudioUnavailable
    try:
        out = SpeakerOutput(); out.start()
    except AudioUnavailable as exc:
        print("UNAVAILABLE", exc.message); raise SystemExit(0)
    t = np.arange(4410) / 22050
    out.write("r", (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32), 22050)
    out.end("r")
    deadline = time.monotonic() + 3
    while out.stats()["played_s"] < 0.19 and time.monotonic() < deadline:
        time.sleep(0.01)
    s = out.stats(); out.close()
    print("PLAYED", s["played_s"], s["device_rate"], s["first_audio_at"] is not None)
    """
)


def test_speaker_plays_a_tone_on_the_alsa_null_device(tmp_path):
    conf = tmp_path / "asound.conf"
    conf.write_text("pcm.!default { type null }\nctl.!default { type hw card 0 }\n")
    env = {**os.environ, "ALSA_CONFIG_PATH": str(conf)}
    res = subprocess.run([sys.executable, "-c", SMOKE], env=env, capture_output=True, text=True,
                         timeout=60, cwd=ROOT)  # fmt: skip
    assert res.returncode == 0, res.stderr
    if "UNAVAILABLE" in res.stdout:
        pytest.skip(f"ALSA null device does not open here: {res.stdout.strip()}")
    played, rate, first = res.stdout.split()[1:]
    assert float(played) >= 0.19 and first == "True"


def test_underrun_times_say_when_the_speaker_ran_dry():
    from desktop.media.clock import VirtualClock
    from desktop.media.fake_audio import FakeAudioOutput

    clock = VirtualClock(start=5.0)
    speaker = FakeAudioOutput(clock, device_rate=16000, pre_roll_ms=20, block_ms=20)
    speaker.start()
    speaker.write("r", np.full(640, 0.1, np.float32), 16000)  # 40 ms, and no end(): more was due
    for _ in range(4):
        clock.advance(0.02)
        speaker.pump()
    assert speaker.stats()["underruns"] == 1 and list(speaker.underrun_times) == [pytest.approx(5.04)]
