"""The call's front end end to end on the virtual clock: fake speaker → room (FakeMicrophone
loopback, through the real capture path) → echo canceller → Silero VAD. The assistant's own
voice must not look like speech to the VAD; the user's voice on top of it must."""

import numpy as np
import pytest

from desktop.media.clock import VirtualClock
from desktop.media.echo import EchoCanceller
from desktop.media.fake_audio import FakeAudioOutput
from desktop.media.fake_mic import FakeMicrophone
from desktop.media.far_end import FarEndReference
from desktop.media.vad import SileroVAD, SpeechStart
from desktop.model.tts import EspeakTTS

pytestmark = pytest.mark.speech_model
ASSISTANT = ("Hello, I am the assistant. The weather today is sunny with a light breeze from "
             "the west, and tomorrow it will rain in the afternoon.")  # fmt: skip
USER = "Stop, please tell me about the train times instead."
T0 = 10.0


def speech_starts(user_at: float | None,
                  user_gain: float = 1.0) -> tuple[list[float], list[float], EchoCanceller]:
    """SpeechStart times (s after T0) on the raw and on the cleaned microphone over 8 s."""
    clock = VirtualClock(start=T0)
    speaker = FakeAudioOutput(clock, device_rate=48000, high_water_ms=20000)
    aec = EchoCanceller(FarEndReference.tap(speaker))
    mic = FakeMicrophone(clock, device_rate=48000)
    mic.loopback(speaker, delay_ms=50, gain=0.5)
    speaker.start()
    mic.start()
    tts = EspeakTTS()
    speaker.write("reply", np.concatenate(list(tts.synthesize(ASSISTANT))), tts.sample_rate)
    speaker.end("reply")
    if user_at is not None:
        mic.say(EspeakTTS("en-gb-x-rp", rate_wpm=150), USER, at=T0 + user_at, gain=user_gain)
    raw_vad, vad = SileroVAD(), SileroVAD()
    raw, clean = [], []
    for _ in range(400):
        clock.advance(0.02)
        speaker.pump()
        mic.pump()
        frames = mic.read()
        for frame, t in zip(frames.samples, frames.times):
            out = aec.process(frame, float(t))
            for starts, events in ((raw, raw_vad.process(frame, float(t))),
                                   (clean, vad.process(out, float(t)))):  # fmt: skip
                starts += [e.t - T0 for e in events if isinstance(e, SpeechStart)]
    return raw, clean, aec


def test_the_assistants_own_voice_is_not_speech_after_the_canceller():
    raw, clean, aec = speech_starts(None)
    assert raw  # without the canceller the echo alone would barge in (measured at 0.1 s)
    assert clean == []
    assert aec.stats()["erle_db"] >= 30.0  # measured 47 dB through the capture path
    assert aec.stats()["far_late_blocks"] == 0


def test_the_users_voice_over_the_echo_is_speech():
    # The user 6 dB above the echo. Measured: VAD start at 3.20 s, 0.19 s after the voice begins
    # (3.01 s); the user alone gives 3.14 s. At the echo's level it comes at 3.81 s: AEC3's
    # suppressor holds back the first ~0.7 s of double talk — and once in a full CI run the 6 dB
    # case gave 3.81 s too (espeak's rendering varies ~2% run to run, and AEC3 with it). So this
    # asserts that the voice is found, once, within that hold-back; a barge-in does not wait for
    # it: the double-talk detector sees the user on the raw microphone (test_double_talk.py).
    _, clean, _ = speech_starts(3.0, user_gain=1.0)
    assert len(clean) == 1
    assert 3.0 <= clean[0] <= 3.9
