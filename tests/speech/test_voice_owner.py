"""The Voice as the speaker's only owner: ducking keeps the user's volume, taps on what was played,
the speaker's counters as a record, one registry of finished replies shared by the ReplyVoice, the
Voice and its pipeline, and the relay's typed commands."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from desktop.media.clock import VirtualClock
from desktop.media.fake_audio import FakeAudioOutput
from desktop.media.far_end import FarEndReference
from desktop.speech.finished import FinishedReplies, Over
from desktop.speech.pipeline import Pipeline
from desktop.speech.playback import PlaybackStats
from desktop.speech.relay import Begin, Delta, Load, Relay
from desktop.speech.reply_voice import ReplyVoice
from desktop.speech.voice import Voice

RATE = 22050


class Mute:
    """A TTS engine that makes no sound."""

    sample_rate = RATE

    def synthesize(self, text):
        return iter(())


@pytest.fixture
def voice_out():
    out = FakeAudioOutput(VirtualClock(), device_rate=RATE, volume=0.8)
    out.start()
    voice = Voice(Mute, out, clock=out.clock)
    yield voice, out
    voice.close()
    out.close()


def test_ducking_silences_and_gives_back_the_users_volume_even_one_set_meanwhile(voice_out):
    voice, out = voice_out
    voice.duck()
    assert out.volume == 0.0
    voice.duck()  # twice: still the user's volume to give back
    voice.unduck()
    assert out.volume == 0.8
    voice.duck()
    voice.set_volume(1.5)  # the settings changed while ducked: not heard until the duck ends
    assert out.volume == 0.0
    voice.unduck()
    assert out.volume == 1.5
    voice.unduck()  # not ducked: nothing changes
    assert out.volume == 1.5


def test_taps_get_what_was_played_until_untapped(voice_out):
    voice, out = voice_out
    seen: list[float] = []
    untap = voice.tap(lambda block, t: seen.append(t))
    assert (voice.device_rate, voice.block_frames) == (out.device_rate, out.block_frames)
    out.pump_blocks(3)
    assert len(seen) == 3
    untap()
    out.pump_blocks(2)
    assert len(seen) == 3 and out.on_played == []


def test_the_echo_cancellers_far_end_taps_the_voice_and_release_untaps(voice_out):
    voice, out = voice_out
    far = FarEndReference.tap(voice)
    assert out.on_played == [far.on_played]
    far.release()
    assert out.on_played == []


def test_playback_stats_and_heard_come_from_the_voice(voice_out):
    voice, out = voice_out
    out.write("r1", np.full(RATE // 2, 0.3, np.float32), RATE)
    out.end("r1")
    out.pump_blocks(10)
    stats = voice.playback_stats()
    assert isinstance(stats, PlaybackStats) and stats.device_rate == RATE
    assert stats.played_s == out.stats()["played_s"] and stats.played_s > 0
    assert voice.heard_s("r1") == out.heard_s("r1") and voice.heard_s("r1") > 0
    assert voice.first_audio_at("r1") == out.first_audio_at("r1") is not None


def test_a_voice_without_sound_output_has_nothing_to_duck_tap_or_count():
    voice = Voice.unavailable("Audio is off")
    voice.duck()
    voice.unduck()
    voice.tap(lambda block, t: None)()
    assert voice.playback_stats() is None and voice.device_rate == 0 and voice.heard_s("r1") == 0.0
    assert voice.heard("r1") == ""


def test_the_registry_keeps_the_strongest_mark_and_the_newest_replies():
    done = FinishedReplies(keep=2)
    done.mark("a", Over.SILENCED)
    done.mark("a", Over.ENDED)  # weaker: ignored
    assert done.at_least("a", Over.SILENCED)
    done.mark("b", Over.ENDED)
    assert "b" in done and not done.at_least("b", Over.DONE)
    done.mark("b", Over.DONE)
    assert done.at_least("b", Over.DONE)
    done.mark("c", Over.ENDED)
    assert "a" not in done and len(done) == 2
    with pytest.raises(ValueError):
        FinishedReplies(keep=0)


def test_one_registry_for_the_reply_voice_the_voice_and_its_pipeline(voice_out):
    voice, out = voice_out
    replies = ReplyVoice(voice)
    voice.stop("r1")  # silenced before it began (e.g. a barge-in at once)
    assert not replies.begin("r1")  # the ReplyVoice sees the Voice's mark
    assert replies.begin("r2")
    replies.end("r2")
    assert voice.finished.at_least("r2", Over.ENDED)
    assert not replies.begin("r2")  # ended: never speaks again
    pipeline = Pipeline(Mute(), out, finished=voice.finished)
    with pipeline:
        pipeline.feed("r1", "late text")  # silenced in the shared registry: dropped
        assert pipeline.metrics()["active"] == 0
        pipeline.feed("r3", "Hello.")
        pipeline.end("r3")
        deadline = time.monotonic() + 5
        while not voice.finished.at_least("r3", Over.DONE):
            assert time.monotonic() < deadline
            time.sleep(0.01)


def test_the_relay_runs_typed_commands_in_order_and_survives_a_failing_one():
    seen, failed, ticks = [], [], threading.Event()

    def handle(cmd):
        if isinstance(cmd, Begin):
            raise RuntimeError("broken")
        seen.append(cmd)

    relay = Relay(handle, ticks.set, lambda cmd, exc: failed.append((cmd, str(exc))), poll_s=0.005)
    relay.start()
    for cmd in (Load(), Begin("r1"), Delta("r1", "Hi"), Delta("r1", " there")):
        relay.put(cmd)
    deadline = time.monotonic() + 5
    while len(seen) < 3:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    relay.halt()
    relay.join(timeout=2)
    assert seen == [Load(), Delta("r1", "Hi"), Delta("r1", " there")]
    assert failed == [(Begin("r1"), "broken")] and ticks.is_set()


def test_the_recordings_player_borrows_only_playing(voice_out):
    """The Voice lends the player its own audio under its own ids, and nothing else: no volume to
    set, no taps, no 'heard'; what it writes reaches the speaker. No speaker: nothing to lend."""
    voice, out = voice_out
    lent = voice.lend()
    assert not any(hasattr(lent, name) for name in ("volume", "tap", "heard_s", "close", "stats"))
    lent.start()
    lent.write("recording-1", np.full(RATE // 5, 0.5, np.float32), RATE)
    lent.end("recording-1")
    out.pump_blocks(20)
    assert np.abs(out.played()).max() > 0.3  # played at the Voice's volume (0.8)
    assert Voice(Mute, None).lend() is None
