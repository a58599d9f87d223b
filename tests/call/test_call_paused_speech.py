"""A call's end of turn on paused speech (issue 21), through the fake microphone on a virtual
clock: MicFrames → silero-vad (200 ms pauses) → CallState → the end-of-turn judge. A turn is not
ended inside a mid-sentence pause the model calls incomplete, speech after the pause continues
the same utterance, the silence fallback always ends the turn, complete turns end promptly, and
a model that fails leaves the silence rule's wait. The same rig with the silence rule cuts the
paused sentence: the test can see a cutoff."""

from __future__ import annotations

import numpy as np
import pytest
from turn_rig import TurnRig

from desktop.call.state import FALLBACK_SILENCE_S, SILENCE_END_S
from desktop.media.paused_speech import RATE, SpokenTurn, make_tts, speak
from desktop.media.smart_turn import SmartTurn, TurnVerdict

pytestmark = pytest.mark.speech_model  # silero-vad


@pytest.fixture(scope="module")
def espeak():
    return make_tts("espeak", "en-us", 1.0)


def paused(tts, before: str, after: str, pause_s: float) -> SpokenTurn:
    head, tail = speak(tts, before), speak(tts, after)
    gap = np.zeros(int(pause_s * RATE), np.float32)
    return SpokenTurn(f"{before} … {after}", np.concatenate([head, gap, tail]),
                      ((head.size / RATE, (head.size + gap.size) / RATE),), "espeak")


class Always:
    """A stand-in model with a fixed verdict (or an error)."""

    def __init__(self, complete: bool | None) -> None:
        self.complete, self.heard = complete, []

    def predict(self, audio):
        self.heard.append(audio.size)
        if self.complete is None:
            raise RuntimeError("the model broke")
        return TurnVerdict(self.complete, 0.9 if self.complete else 0.1, 5.0)


def test_an_incomplete_pause_keeps_the_turn_and_the_fallback_ends_it(espeak):
    turn = paused(espeak, "I would like to", "book a table for two.", 0.9)
    model = Always(False)
    rig = TurnRig(model)
    heard = rig.hear(turn, tail_s=FALLBACK_SILENCE_S + 1)
    assert not heard.cut_off and heard.begins == 1  # one utterance across the pause
    assert len(model.heard) == 2  # asked at the pause and at the end
    assert model.heard[0] < model.heard[1] <= 8 * RATE  # the turn so far, growing
    ((end, at),) = heard.ends
    assert end.by == "fallback" and abs((at - heard.eos) - FALLBACK_SILENCE_S) < 0.25
    rig.close()


def test_the_silence_rule_and_a_complete_verdict_cut_a_long_pause(espeak):
    turn = paused(espeak, "I went to the shop and", "bought some milk.", 0.9)
    for rig in (TurnRig(None), TurnRig(Always(True))):
        heard = rig.hear(turn)
        assert heard.cut_off and heard.begins == 2  # the rig sees a turn ended inside the pause
        rig.close()


def test_a_failing_model_leaves_the_silence_rules_wait(espeak):
    turn = SpokenTurn("What time is it?", speak(espeak, "What time is it?"), (), "espeak")
    rig = TurnRig(Always(None))
    heard = rig.hear(turn)
    ((end, at),) = heard.ends
    assert end.by == "silence" and SILENCE_END_S - 0.05 < at - heard.eos < SILENCE_END_S + 0.25
    rig.close()


def test_with_the_model_pauses_are_kept_and_complete_turns_end_promptly(espeak):
    rig = TurnRig(SmartTurn())
    for before, after in (("My favourite colour is blue, so", "I painted my room blue."),
                          ("I was thinking that we could, um,", "go to the beach tomorrow.")):
        heard = rig.hear(paused(espeak, before, after, 0.8))
        assert not heard.cut_off and heard.begins == 1, heard.ends
        assert len(heard.ends) == 1 and heard.ends[0][0].by in ("smart", "fallback")  # after the last word
    for text in ("What is the capital of France?", "Can you book a table for two tonight?"):
        heard = rig.hear(SpokenTurn(text, speak(espeak, text), (), "espeak"))
        ((end, at),) = heard.ends
        assert end.by == "smart" and end.probability > 0.5
        # the VAD's 200 ms pause and its last chunk, then the model (its real cost counted in)
        assert (end.t - heard.eos) - end.model_ms / 1000 < 0.35 and at == end.t
    rig.close()
