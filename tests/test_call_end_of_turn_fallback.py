"""When the end-of-turn model cannot load (issue 21), a call still starts: its parts use the
silence rule (the VAD's 500 ms end of turn, no pauses to judge) and the call tells the user with
a notice event; "silence only" in the settings gives the same rule without a notice, and with
the model the VAD reports pauses for it to judge."""

from __future__ import annotations

import asyncio
import time

import pytest
from call_fakes import EnergyDetector, ScriptedMic, ScriptedTranscriber, call_rig

from desktop.call import parts as call_parts
from desktop.call.factory import CallFactory
from desktop.call.parts import CALL_VAD, CALL_VAD_PAUSES, CallParts, make_call_parts
from desktop.call.state import CallMode
from desktop.media import smart_turn
from desktop.media.clock import VirtualClock
from desktop.media.smart_turn import SmartTurn, SmartTurnUnavailable
from desktop.settings import Settings


class WaitingMic(ScriptedMic):
    """Waits for frames as a real microphone does (the factory's media thread would spin)."""

    def read(self, max_frames=None, timeout: float = 0.0):
        if not self.pending:
            time.sleep(timeout)
        return super().read(max_frames, timeout)


def _no_model():
    raise SmartTurnUnavailable("The end-of-turn model is not installed (pip install --no-deps pipecat-ai)")


@pytest.mark.speech_model  # silero-vad
def test_the_parts_fall_back_to_the_silence_rule_with_a_notice(monkeypatch):
    asr = object()  # not used until a call runs
    smart = make_call_parts(mic=object(), asr=asr)  # the default: smart
    assert isinstance(smart.turn_model, SmartTurn) and smart.notice == ""
    assert smart.detector.ended == "pause" and smart.detector.vad.config == CALL_VAD_PAUSES
    quiet = make_call_parts(mic=object(), asr=asr, end_of_turn="silence")
    assert quiet.turn_model is None and quiet.notice == "" and quiet.detector.ended == "end"
    monkeypatch.setattr(smart_turn, "model_path", _no_model)
    broken = make_call_parts(mic=object(), asr=asr, end_of_turn="smart")
    assert broken.turn_model is None and broken.detector.ended == "end" and broken.detector.vad.config == CALL_VAD
    assert "not installed" in broken.notice and "silence" in broken.notice


def test_a_call_without_the_model_starts_and_shows_the_notice(monkeypatch):
    async def main() -> None:
        clock = VirtualClock()
        speaker, voice, gw = await call_rig(clock)
        mic = WaitingMic(clock)
        notice = call_parts.end_of_turn_model  # the real rule, with the model gone
        monkeypatch.setattr(smart_turn, "model_path", _no_model)
        _, text = notice("smart")

        def parts(settings):
            assert settings.end_of_turn == "smart"
            return CallParts(mic, EnergyDetector(), ScriptedTranscriber([]), notice=text)

        factory = CallFactory(gw, lambda: voice, lambda: Settings(recording_enabled=False), clock=clock)
        monkeypatch.setattr(factory, "_parts", parts)
        call = await factory.start(CallMode.DUPLEX)
        events = []
        call.listeners.append(events.append)  # as the page does, once start returned
        await asyncio.sleep(0.05)
        assert [e.text for e in events if e.kind == "notice"] == [text] and call.end_of_turn is None
        await call.end()
        await gw.close()
        voice.close()
        speaker.close()

    asyncio.run(asyncio.wait_for(main(), 60))
