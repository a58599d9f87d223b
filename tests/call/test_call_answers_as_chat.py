"""On the embedded default (SmolLM2-135M Q4_1, greedy, fp32): the same three questions asked in a
chat (a Reply, as the chat page sends it) and in a call (a Call built by CallFactory, the questions
coming from its transcriber) get the same replies: a call's session holds the same token ids as
the chat's request, so only the prompt and the sampling could make them differ, and both now
follow the user's choices (the preset chosen for new chats, the Settings' sampling with its
repetition penalty). Before, a call answered under its own prompt at temperature 0.7 with no
repetition penalty, and this test failed."""

from __future__ import annotations

import asyncio
import time

import pytest
from call_fakes import EnergyDetector, ScriptedMic, ScriptedTranscriber
from gw_helpers import run

from desktop.call.factory import CallFactory
from desktop.call.parts import CallParts
from desktop.call.state import CallMode, CallPhase
from desktop.chat.conversations import ConversationStore, StoredMessage
from desktop.chat.presets import PresetStore
from desktop.chat.reply import Reply
from desktop.gateway.gateway import Gateway
from desktop.media.clock import VirtualClock
from desktop.model.loader import ModelSpec
from desktop.settings import Settings
from desktop.speech.voice import Voice
from desktop.workers.config import WorkerConfig
from desktop.workers.thread_host import ThreadHost


class QuietMic(ScriptedMic):
    """No frames unless pushed; waits as a real microphone does (the call's media thread polls it)."""

    def read(self, max_frames=None, timeout: float = 0.0):
        if not self.pending and timeout:
            time.sleep(timeout)
        return super().read(max_frames, timeout)

pytestmark = [pytest.mark.real_model, pytest.mark.slow]
QUESTIONS = ["Hello, can you hear me?", "What is the capital of France?", "Tell me something about the history of that city."]


async def chat_replies(gw: Gateway, store: ConversationStore, presets: PresetStore, settings: Settings) -> list[str]:
    preset = presets.get(settings.system_preset)
    conv = store.new(preset.prompt, preset.id)  # a new chat, as the chat page makes it
    replies = []
    for question in QUESTIONS:
        Reply.ask(store, conv, StoredMessage("user", question))
        reply = Reply(gw, store, conv, settings.sampling())
        await reply.run()
        replies.append(reply.message.content)
    return replies


async def call_replies(gw: Gateway, store: ConversationStore, presets: PresetStore, settings: Settings) -> list[str]:
    clock = VirtualClock()
    factory = CallFactory(gw, lambda: Voice.unavailable("no speaker in this test"), lambda: settings,
                          presets=presets, store=store, clock=clock)
    factory._parts = lambda s: CallParts(QuietMic(clock), EnergyDetector(), ScriptedTranscriber(list(QUESTIONS)))
    call = await factory.start(CallMode.DUPLEX)
    for n, _ in enumerate(QUESTIONS, 1):  # the user speaks, stops; the transcriber gives the words
        call.turn_taking.do(call.state.speech_start)
        call.turn_taking.do(call.state.speech_end)
        while len(call.turns) < n or call.phase is not CallPhase.LISTENING:
            await asyncio.sleep(0.01)
    replies = [t.assistant_text for t in call.turns]
    await call.end()
    return replies


def test_a_call_answers_as_the_chat_does(tmp_path):
    presets = PresetStore(tmp_path)
    settings = Settings(temperature=0.0, max_tokens=24)  # greedy; the default preset, repetition penalty 1.05
    store = ConversationStore(tmp_path / "conversations")

    async def main() -> tuple[list[str], list[str]]:
        gw = Gateway([ThreadHost("t0", ModelSpec("default"), WorkerConfig(num_slots=4), threads=1)])
        await gw.start()
        try:
            assert await gw.wait_ready(timeout=300)
            return await chat_replies(gw, store, presets, settings), await call_replies(gw, store, presets, settings)
        finally:
            await gw.close()

    chat, call = run(main(), timeout=600)
    assert all(chat) and call == chat, (chat, call)
