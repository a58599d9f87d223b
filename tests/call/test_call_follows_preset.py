"""A call follows the user's choices as a new chat does (CallFactory): the preset chosen for new
chats gives the call's system prompt, voice and speaking rate; the Settings give its sampling,
repetition penalty included; the call, saved as a conversation, keeps the preset."""

from __future__ import annotations

import asyncio
import time

from call_fakes import EnergyDetector, ScriptedMic, ScriptedTranscriber
from gw_helpers import run

from desktop.call.factory import CallFactory
from desktop.call.parts import CallParts
from desktop.call.state import CallMode
from desktop.chat.conversations import ConversationStore
from desktop.chat.presets import PresetStore
from desktop.media.clock import VirtualClock
from desktop.media.fake_audio import FakeAudioOutput
from desktop.model.params import SamplingParams
from desktop.protocol import Done, TokenStats
from desktop.settings import Settings
from desktop.speech.voice import Voice


class QuietMic(ScriptedMic):
    """No frames unless pushed; waits as a real microphone does (the call's media thread polls it)."""

    def read(self, max_frames=None, timeout: float = 0.0):
        if not self.pending and timeout:
            time.sleep(timeout)
        return super().read(max_frames, timeout)


class Stream:
    def __init__(self, request_id: str) -> None:
        self.request_id, self.events = request_id, [Done(request_id, stats=TokenStats())]

    def __aiter__(self):
        return self

    async def __anext__(self):
        if not self.events:
            raise StopAsyncIteration
        return self.events.pop(0)


class RecordingGateway:
    """What a call asks of the engine, written down: the session's system prompt, the user's
    messages, the sampling of each reply."""

    def __init__(self) -> None:
        self.systems: list[str | None] = []
        self.appended: list[list] = []
        self.params: list[SamplingParams] = []

    async def create_session(self, system=None, *, call=False):
        self.systems.append(system)
        return "s1"

    def append_input(self, session_id, messages, draft=False):
        if not draft:
            self.appended.append(list(messages))
        return Stream(f"a{len(self.appended)}")

    def generate_stream(self, session_id, params=None, messages=None):
        if messages:
            self.appended.append(list(messages))
        self.params.append(params)
        return Stream(f"g{len(self.params)}")

    async def cancel(self, request_id):
        pass

    async def end_session(self, session_id):
        pass


def test_a_call_takes_the_presets_prompt_voice_and_rate_and_the_settings_sampling(tmp_path):
    presets = PresetStore(tmp_path)
    preset = presets.add("Quick voice", "You answer in one short sentence.", voice="espeak:en-us", rate=1.3)
    settings = Settings(system_preset=preset.id, temperature=0.3, top_p=0.8, top_k=20, repetition_penalty=1.2,
                        max_tokens=99, seed=7, tts_engine="espeak")
    clock = VirtualClock()
    out = FakeAudioOutput(clock, device_rate=22050, pre_roll_ms=40)
    out.start()
    voice = Voice.create(settings, sink=out, clock=clock)
    gw = RecordingGateway()
    store = ConversationStore(tmp_path / "conversations")
    saved = []
    factory = CallFactory(gw, lambda: voice, lambda: settings, presets=presets, store=store, clock=clock)
    factory.on_saved = saved.append
    factory._parts = lambda s: CallParts(QuietMic(clock), EnergyDetector(), ScriptedTranscriber([]))  # no Whisper

    async def main() -> None:
        call = await factory.start(CallMode.DUPLEX)
        assert gw.systems == ["You answer in one short sentence."] and call.system == gw.systems[0]
        assert call.params == settings.sampling()
        assert call.params.repetition_penalty == 1.2 and call.params.temperature == 0.3
        assert voice.speech == ("espeak", "en-us", 1.3)  # the preset's voice and rate speak the replies
        await call.replies.run("What is the capital of France?")  # (not THINKING: asked, then cancelled)
        assert gw.params == [settings.sampling()]
        await call.end()
        for _ in range(100):
            if saved:
                break
            await asyncio.sleep(0.01)

    try:
        run(main(), timeout=30)
    finally:
        voice.close()
        out.close()
    (conv,) = saved
    assert conv.preset == preset.id and conv.system_prompt == "You answer in one short sentence."


def test_a_call_without_a_chosen_preset_uses_the_first_and_keeps_the_settings_voice(tmp_path):
    presets = PresetStore(tmp_path)
    settings = Settings(system_preset="gone")
    factory = CallFactory(RecordingGateway(), lambda: None, lambda: settings, presets=presets)
    preset = factory.preset(settings)
    assert preset.id == "assistant" and preset.speech() == (None, None, 1.0)
