"""The player on a virtual clock: position, speed, seek, end; the mix fed to the fake speaker."""

from __future__ import annotations

import numpy as np
import pytest

from recording_samples import sample_call
from desktop.media.clock import VirtualClock
from desktop.media.fake_audio import FakeAudioOutput
from desktop.recording.mix import Mix
from desktop.recording.player import Player
from desktop.recording.reader import open_recording


def test_position_speed_seek_and_end():
    clock = VirtualClock()
    player = Player(10.0, clock=clock)
    states = []
    player.on_state = states.append
    player.play()
    clock.advance(2.0)
    assert player.tick() == pytest.approx(2.0)
    player.set_speed(2.0)
    clock.advance(1.0)
    assert player.tick() == pytest.approx(4.0)
    player.pause()
    clock.advance(5.0)
    assert player.position == pytest.approx(4.0)
    player.seek(9.5)
    player.play()
    clock.advance(1.0)
    assert player.tick() == 10.0 and not player.playing
    assert states == [True, False, True, False]
    player.play()  # from the end: starts again
    assert player.position == 0.0


def test_nothing_to_play_does_not_start():
    """A recording of no length (empty, or nothing timed yet) never starts: no play/stop blink."""
    clock = VirtualClock()
    player = Player(0.0, clock=clock)
    states = []
    player.on_state = states.append
    assert not player.playable and Player(0.1, clock=clock).playable
    player.toggle()
    clock.advance(1.0)
    assert not player.playing and player.tick() == 0.0 and states == []


def test_mix_is_both_voices_at_one_rate(tmp_path):
    rec = open_recording(sample_call(tmp_path, video=False).folder)
    mix = Mix([rec.user, rec.ai])
    assert mix.rate == 22050
    mix.seek(0.5)
    a = mix.read(11025)  # 0.5–1.0 s: the user's 440 Hz, resampled
    spectrum = np.abs(np.fft.rfft(a))
    assert abs(np.argmax(spectrum) * 22050 / len(a) - 440) < 5
    mix.seek(2.2)
    b = np.concatenate([mix.read(3000), mix.read(3000)])  # the reply's 880 Hz, in two reads
    assert abs(np.argmax(np.abs(np.fft.rfft(b))) * 22050 / len(b) - 880) < 5


def test_playback_feeds_the_speaker_in_time(tmp_path):
    rec = open_recording(sample_call(tmp_path, video=False).folder)
    clock = VirtualClock()
    speaker = FakeAudioOutput(clock, device_rate=22050, pre_roll_ms=20)
    player = Player(rec.duration, Mix([rec.user, rec.ai]), speaker, clock=clock, lead_s=0.2)
    player.seek(1.8)
    player.play()
    for _ in range(100):  # 2 s in 20 ms ticks
        clock.advance(0.02)
        player.tick()
        speaker.pump()
    played = speaker.played()
    level = [float(np.abs(played[i:i + 2205]).max()) for i in range(0, len(played) - 2205, 2205)]
    # the reply (2.0–3.2 s) is heard from ≈0.2 s in for ≈1.2 s, then silence until the user at 3.2 s
    loud = [i for i, v in enumerate(level) if v > 0.3]
    assert loud[0] in (2, 3) and 12 <= loud[-1] <= 19
    assert player.position == pytest.approx(3.8, abs=0.01)
    player.pause()
    speaker.pump(clock.now() + 0.5)
    tail = speaker.played()[len(played) + 2205:]
    assert np.abs(tail).max() == 0  # pause flushes what was queued


def test_double_speed_plays_faster():
    clock = VirtualClock()
    speaker = FakeAudioOutput(clock, device_rate=16000, pre_roll_ms=20)

    class Ramp:
        rate, empty = 16000, False

        def __init__(self):
            self.pos = 0

        def seek(self, t):
            self.pos = int(t * 16000)

        def read(self, n):
            out = np.sin(2 * np.pi * 200 * (np.arange(self.pos, self.pos + n) / 16000)).astype(np.float32)
            self.pos += n
            return out

    player = Player(10.0, Ramp(), speaker, clock=clock, lead_s=0.2)
    player.set_speed(2.0)
    player.play()
    for _ in range(50):
        clock.advance(0.02)
        player.tick()
        speaker.pump()
    played = speaker.played()[4000:]
    assert abs(np.argmax(np.abs(np.fft.rfft(played))) * 16000 / len(played) - 400) < 10
    assert player.position == pytest.approx(2.0)


def test_a_speaker_that_cannot_open_plays_on_silently():
    from desktop.media.audio_out import AudioUnavailable

    class Broken:
        def start(self):
            raise AudioUnavailable("No sound output device found")

        def write(self, *a):
            raise AssertionError("never written to")

        flush = end = write

    class Silence:
        rate, empty = 16000, False

        def seek(self, t):
            pass

        def read(self, n):
            return np.zeros(n, np.float32)

    clock = VirtualClock()
    player = Player(5.0, Silence(), Broken(), clock=clock)
    player.play()
    assert player.error == "No sound output device found" and player.sink is None and player.playing
    clock.advance(1.0)
    assert player.tick() == 1.0
