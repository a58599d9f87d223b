"""Issue 19, new-user item 8 (the call part): a call can be continued as a chat. When a call
ends, its exchange is a conversation in the store, titled "Call · <first words>", with the
user's turns and the assistant's replies as heard (a barge-in keeps only what was heard)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from call_fakes import EnergyDetector, ScriptedMic, ScriptedTranscriber, call_rig, pump_frames, spoken_ids, until_heard, until_phase
from gw_helpers import run

from desktop.call.factory import CallFactory
from desktop.call.call import TurnMetrics
from desktop.call.transcript import call_messages, save_call
from desktop.call.state import CallMode, CallPhase
from desktop.chat.conversations import ConversationStore
from desktop.media.clock import VirtualClock
from desktop.model.params import SamplingParams
from desktop.settings import Settings

pytestmark = pytest.mark.hardening


def test_turns_become_alternating_messages_as_heard():
    turns = [TurnMetrics(1, user_text="Tell me  a story.", assistant_text="Once upon a time there was a fox.",
                         heard="Once upon a time"),
             TurnMetrics(2, user_text="Wait.", assistant_text="Sure", heard=""),  # cut before a sound
             TurnMetrics(3, user_text="Another one?", assistant_text="A bird sang."),
             TurnMetrics(4, user_text="", assistant_text="")]
    assert call_messages(turns) == [("user", "Tell me a story."), ("assistant", "Once upon a time"),
                                    ("user", "Wait.\nAnother one?"), ("assistant", "A bird sang.")]


def test_a_call_nobody_spoke_in_is_not_saved(tmp_path):
    store = ConversationStore(tmp_path)
    assert save_call(store, [TurnMetrics(1)], "sys") is None and store.list() == []


def test_an_ended_call_is_a_conversation_in_the_store(tmp_path, monkeypatch):
    store = ConversationStore(tmp_path / "conversations")
    saved = []

    async def main() -> None:
        clock = VirtualClock()
        speaker, voice, gw = await call_rig(clock)
        spoken = spoken_ids(voice)
        mic = ScriptedMic(clock)
        asr = ScriptedTranscriber(["Tell me a story about a red fox.", "Stop, another one."])
        parts = SimpleNamespace(mic=mic, detector=EnergyDetector(), transcriber=asr, canceller=None, turn_model=None, notice="")
        factory = CallFactory(gw, lambda: voice, lambda: Settings(), store=store, clock=clock)
        factory.on_saved = saved.append
        monkeypatch.setattr(factory, "_parts", lambda settings: parts)
        monkeypatch.setattr(CallFactory, "_media", staticmethod(lambda call: None))  # the test pumps
        monkeypatch.setattr(CallFactory, "_echo", staticmethod(lambda parts, speaker: lambda: None))  # a scripted mic hears no echo
        call = await factory.start(CallMode.DUPLEX)
        call.params = SamplingParams(max_tokens=40, ignore_eos=True)

        async def frames(n: int, loud: bool) -> None:
            await pump_frames(clock, mic, speaker, call, n, loud)


        await frames(25, True)
        await until_phase(call, CallPhase.SPEAKING, frames)
        await frames(40, False)  # some of the reply is heard
        await until_heard(voice, spoken, frames)  # at least a word of it, whatever the load
        for _ in range(400):  # then the user talks over it
            if call.turns[0].heard is not None:
                break
            await frames(1, True)
        await frames(10, False)
        await until_phase(call, CallPhase.SPEAKING, frames)
        for _ in range(3000):  # the second reply plays out
            if call.phase is CallPhase.LISTENING:
                break
            await frames(1, False)
        assert store.list() == []  # not before the call ends
        await call.end()
        first = call.turns[0]
        convs = store.list()
        assert len(convs) == 1 and saved == convs
        conv = convs[0]
        assert conv.title == "Call · Tell me a story about a red fox."
        roles = [m.role for m in conv.messages]
        assert roles == ["user", "assistant", "user", "assistant"]
        assert conv.messages[0].content == "Tell me a story about a red fox."
        assert first.heard and conv.messages[1].content == first.heard.strip()
        assert len(first.heard) < len(first.assistant_text)  # the barge-in kept only what was heard
        assert conv.messages[3].content == call.turns[1].assistant_text.strip()
        assert conv.system_prompt == call.system
        again = ConversationStore(tmp_path / "conversations").get(conv.id)  # on disk: continued by typing later
        assert again is not None and [m.content for m in again.messages] == [m.content for m in conv.messages]
        await gw.close()
        voice.close()
        speaker.close()

    run(main(), 120)
