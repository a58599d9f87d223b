"""A voice call end to end on a virtual clock (issue 10): scripted microphone frames, an energy
voice-activity detector and a scripted transcriber (the real VAD/ASR have their own tests), the
real gateway over a thread host with the tiny model, the real Voice speaking through espeak into
the fake speaker. A turn is answered aloud; speech over the reply cuts it within one audio block
and the session keeps only what was heard; the next turn extends the same session's KV."""

from __future__ import annotations


import numpy as np
import pytest
from call_fakes import EnergyDetector, ScriptedMic, ScriptedTranscriber, call_rig, pump_frames, spoken_ids, until_heard, until_phase
from gw_helpers import run

from desktop.call.call import Call, CallEvent
from desktop.call.state import CallMode, CallPhase
from desktop.speech.voice import Voice
from desktop.media.clock import VirtualClock
from desktop.model.params import SamplingParams

SPEAKER_RATE = 22050


def test_a_call_answers_aloud_is_cut_by_speech_and_keeps_what_was_heard():
    async def main() -> None:
        clock = VirtualClock()
        speaker, voice, gw = await call_rig(clock)
        spoken = spoken_ids(voice)
        mic = ScriptedMic(clock)
        asr = ScriptedTranscriber(["Tell me a story.", "Stop, another one.", "Thanks."])
        call = Call(gw, mic, voice, EnergyDetector(), asr, clock=clock,
                    params=SamplingParams(max_tokens=40, ignore_eos=True))
        events: list[CallEvent] = []
        call.listeners.append(events.append)
        await call.start()

        async def frames(n: int, loud: bool) -> None:
            await pump_frames(clock, mic, speaker, call, n, loud)


        await frames(25, True)  # 0.5 s of speech
        assert call.phase is CallPhase.USER_SPEAKING and asr.began == 1 and asr.fed > 0
        await until_phase(call, CallPhase.SPEAKING, frames, events=events)  # VAD end → transcript → reply → its first audio
        first = call.turns[0]
        assert first.user_text == "Tell me a story." and first.asr_ms == 12.5
        assert first.eos_to_audio_ms is not None and first.eos_to_audio_ms > 0
        await frames(40, False)  # 0.8 s of the reply heard
        await until_heard(voice, spoken, frames)  # at least a word of it, whatever the load
        played_before = np.abs(speaker.played()).sum()
        await frames(3, True)  # the user talks over it
        assert call.phase is CallPhase.USER_SPEAKING and call.state.barge_ins == 1
        await frames(2, True)
        quiet = speaker.played()[-int(SPEAKER_RATE * 0.04):]
        assert np.abs(quiet).max() == 0  # silent within a block or two of the speech onset
        assert np.abs(speaker.played()).sum() >= played_before
        for _ in range(400):
            if first.heard is not None:
                break
            await frames(1, True)
        assert first.heard is not None and first.heard and first.assistant_text
        assert any(e.kind == "cut" and e.text == first.heard for e in events)
        await frames(10, False)
        await until_phase(call, CallPhase.SPEAKING, frames, events=events)
        second = call.turns[1]
        assert second.user_text == "Stop, another one."
        for _ in range(400):  # its first audio can come before the reply's Done (its stats)
            if second.ttft_ms is not None:
                break
            await frames(1, False)
        assert second.cached_tokens > 0 and second.new_tokens < 40  # the session's KV was kept and extended
        await call.end()
        assert call.phase is CallPhase.ENDED and mic.closed and events[-1].kind == "ended"
        assert {e.kind for e in events} >= {"phase", "level", "partial", "user", "assistant", "cut", "metrics", "ended"}
        phases = [e.phase for e in events if e.kind == "phase"]  # every change reported, whichever thread made it
        assert phases[:5] == [CallPhase.LISTENING, CallPhase.USER_SPEAKING, CallPhase.TRANSCRIBING,
                              CallPhase.THINKING, CallPhase.SPEAKING] and phases[-1] is CallPhase.ENDED
        await gw.close()
        voice.close()
        speaker.close()

    run(main(), timeout=120)
