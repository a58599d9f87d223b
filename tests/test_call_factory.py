"""A call as the app starts it (CallFactory), with real speech models: espeak speech through the
fake microphone (the real one cannot open here), silero-vad, Whisper tiny.en with partials, the
tiny LLM over a thread host, and the Voice speaking into the fake speaker. The user's sentence is
understood, answered aloud in the call's session, and the call hangs up cleanly; it is recorded
(the setting's default) with the "● Recording" sign, and its folder is complete once it ends."""

from __future__ import annotations

import asyncio
import time

import pytest

from desktop.call.factory import CallFactory
from desktop.call.state import CallMode, CallPhase
from desktop.gateway.gateway import Gateway
from desktop.speech.voice import Voice
from desktop.media.clock import RealClock
from desktop.media.fake_audio import FakeAudioOutput
from desktop.media.fake_mic import FakeMicrophone
from desktop.media.wer import word_error_rate
from desktop.model.loader import ModelSpec
from desktop.model.tts import EspeakTTS
from desktop.recording.replay import read_timeline
from desktop.recording.service import RECORDING, Recordings
from desktop.settings import Settings
from desktop.workers.config import WorkerConfig
from desktop.workers.thread_host import ThreadHost

pytestmark = pytest.mark.speech_model
SENTENCE = "Please tell me a short story about a red balloon."


def test_a_spoken_sentence_is_understood_and_answered(monkeypatch, tmp_path):
    clock = RealClock()  # the fake devices play and capture in real time, as real ones do
    mic = FakeMicrophone(clock)
    monkeypatch.setattr("desktop.media.mic.Microphone", lambda device=None: mic)

    async def main() -> None:
        speaker = FakeAudioOutput(clock, device_rate=22050, pre_roll_ms=40)
        speaker.start(thread=True)
        voice = Voice(lambda: EspeakTTS(rate_wpm=240), speaker, clock=clock)
        gw = Gateway([ThreadHost("t0", ModelSpec("tiny"), WorkerConfig(num_slots=2), threads=1)])
        await gw.start()
        try:  # a failed check must not leave the worker, the voice or the devices running for later tests
            assert await gw.wait_ready(timeout=60)
            settings = Settings(call_idle_timeout_s=60.0)
            states: list[str] = []
            factory = CallFactory(gw, lambda: voice, lambda: settings, recordings=Recordings(lambda: settings, tmp_path),
                                  model=lambda: "tiny")
            factory.on_recording = states.append
            call = await factory.start(CallMode.DUPLEX)
            assert states == [RECORDING]
            events = []
            call.listeners.append(events.append)
            mic.start(thread=True)
            spoken_at = mic.say(EspeakTTS(voice="en-us", rate_wpm=170), SENTENCE, at=clock.now() + 0.3)
            deadline = time.monotonic() + 40
            # the reply has started (its audio is queued) and the speaker played it: only then is there an AI track
            while (not call.turns or call.turns[0].first_audio_t is None or call.turns[0].ttft_ms is None
                   or speaker.stats()["first_audio_at"] is None):
                assert time.monotonic() < deadline, ([(e.kind, e.text) for e in events if e.kind != 'level'], call.phase)
                await asyncio.sleep(0.02)
            turn = call.turns[0]
            assert word_error_rate(SENTENCE, turn.user_text) <= 0.2, turn.user_text
            assert turn.speech_end_t is not None and turn.speech_end_t > spoken_at
            assert turn.first_audio_t > turn.speech_end_t and turn.ttft_ms is not None
            assert any(e.kind == "partial" for e in events) and any(e.kind == "assistant" for e in events)
            await call.end()
            assert call.phase is CallPhase.ENDED and events[-1].kind == "ended"
            while states[-1] != "":  # the recording closes after the call's end
                assert time.monotonic() < deadline + 10
                await asyncio.sleep(0.02)
            (folder,) = tmp_path.glob("*-call-*")
            lines = read_timeline(folder)
            assert [e["text"] for e in lines if e["kind"] == "user_text"] == [turn.user_text]
            assert lines[-1]["kind"] == "end" and any(e["kind"] == "audio" and e["track"] == "ai" for e in lines)
        finally:
            await gw.close()
            voice.close()
            speaker.close()
            mic.close()

    asyncio.run(asyncio.wait_for(main(), 90))


def test_asr_runs_beside_the_model_and_falls_back_to_the_cpu(monkeypatch):
    from desktop.media import asr

    tried: list[str] = []

    class FakeWhisper:
        def __init__(self, device: str = "cpu", threads: int = 2) -> None:
            tried.append(device)
            if device.startswith("cuda"):
                raise asr.ASRUnavailable("no CUDA runtime for CTranslate2")
            self.device = device

    monkeypatch.setattr(asr, "WhisperASR", FakeWhisper)
    monkeypatch.setattr("desktop.call.parts.make_call_parts", lambda device, asr=None, **kw: asr)
    factory = CallFactory(None, lambda: None, Settings)  # only the parts: no gateway, voice or devices
    whisper = factory._parts(Settings(device="cuda:1"))
    assert tried == ["cuda:1", "cpu"] and whisper.device == "cpu"
    factory._asr = None
    assert factory._parts(Settings(device="cpu")).device == "cpu" and tried[-1] == "cpu"
