"""A preset's voice and speaking rate reach the Voice (`Voice.use`): the engine it names is loaded
for the next reply, a faster rate makes shorter audio, engine None follows the Settings, and the
same choice again loads nothing."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from desktop.speech.voice import Voice
from desktop.speech.voice_audio import VoiceEvent, VoiceEventKind
from desktop.media.clock import VirtualClock
from desktop.media.fake_audio import FakeAudioOutput
from desktop.model.tts import make_tts
from desktop.settings import Settings

RATE = 22050
SENTENCE = "The quick brown fox jumps over the lazy dog, and then it runs away into the woods."


def spoken_seconds(voice: Voice, out: FakeAudioOutput, rid: str, events: list[VoiceEvent]) -> float:
    """Speak SENTENCE as reply `rid` and play it out on the virtual clock; its audio's length."""
    voice.speak_begin(rid)
    voice.speak_delta(rid, SENTENCE)
    voice.speak_end(rid)
    deadline = time.monotonic() + 30
    while not any(e.kind is VoiceEventKind.FINISHED and e.request_id == rid for e in list(events)):
        assert time.monotonic() < deadline, events
        time.sleep(0.002)
        out.clock.advance(out.block_s)
        out.pump()
    audio, rate = voice.audio_of(rid)
    return audio.size / rate


def test_the_presets_voice_and_rate_reach_the_voice():
    out = FakeAudioOutput(VirtualClock(), device_rate=RATE, pre_roll_ms=40)
    out.start()
    voice = Voice.create(Settings(tts_engine="espeak"), sink=out, clock=out.clock)
    events: list[VoiceEvent] = []
    lock = threading.Lock()
    voice.add_listener(lambda e: (lock.acquire(), events.append(e), lock.release()))
    try:
        assert voice.speech == ("espeak", None, 1.0)  # the Settings' engine, its default voice
        normal = spoken_seconds(voice, out, "r1", events)
        voice.use("espeak", "en-us", 2.0)  # a preset: espeak, twice as fast
        assert voice.speech == ("espeak", "en-us", 2.0)
        fast = spoken_seconds(voice, out, "r2", events)
        assert fast < 0.7 * normal, (fast, normal)
        loads = sum(e.kind is VoiceEventKind.LOADING for e in events)
        voice.use("espeak", "en-us", 2.0)  # the same choice: nothing to load
        voice.use(None, None, 1.0)  # a preset that keeps the Settings' voice
        assert voice.speech == ("espeak", None, 1.0)
        voice.update(Settings(tts_engine="espeak", tts_voice="en-gb-x-rp"))  # Settings change: followed
        assert voice.speech == ("espeak", "en-gb-x-rp", 1.0)
        voice.use("espeak", "en-us", 2.0)
        voice.update(Settings(tts_engine="espeak", volume=0.5))  # a preset's choice outlives a Settings change
        assert voice.speech == ("espeak", "en-us", 2.0)
        assert sum(e.kind is VoiceEventKind.LOADING for e in events) == loads  # loads wait for a reply
    finally:
        voice.close()
        out.close()


def test_make_tts_speaks_at_the_rate_asked():
    slow = sum(c.size for c in make_tts("espeak", None, 0.5).synthesize(SENTENCE))
    normal = sum(c.size for c in make_tts("espeak", None, 1.0).synthesize(SENTENCE))
    assert normal < 0.7 * slow


@pytest.mark.speech_model  # Piper loads in 2–6 s, twice
@pytest.mark.slow
def test_piper_speaks_faster_at_a_higher_rate():
    normal = sum(c.size for c in make_tts("piper", None, 1.0).synthesize(SENTENCE))
    fast = sum(c.size for c in make_tts("piper", None, 1.5).synthesize(SENTENCE))
    assert 0.55 * normal < fast < 0.8 * normal, (fast, normal)
