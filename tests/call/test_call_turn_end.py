"""The end of a user's turn in CallState (issue 21): a short pause asks the end-of-turn model; a
complete verdict ends the turn, an incomplete one keeps listening until the silence fallback;
speech after a pause continues the same utterance; late verdicts are ignored; the silence rule
and barge-in are as before; the judge (EndOfTurn) gives the model the turn so far, its pre-roll
included, and a broken model leaves the silence rule. No audio or model."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from desktop.call.end_of_turn import KEEP_S, PRE_ROLL_S, RATE, EndOfTurn
from desktop.call.state import (
    FALLBACK_SILENCE_S, SILENCE_END_S, AskTurnEnd, BeginUtterance, CallMode, CallPhase, CallState, CancelUtterance,
    EndUtterance, SendTurn, StopReply,
)
from desktop.call.turn_taking import TurnTaking
from desktop.media.clock import VirtualClock
from desktop.media.smart_turn import TurnVerdict


def speaking(mode: CallMode = CallMode.DUPLEX) -> CallState:
    call = CallState(mode)
    assert call.speech_start(0.0) == [BeginUtterance()]
    return call


def test_a_complete_verdict_ends_the_turn_at_the_verdict():
    call = speaking()
    assert call.speech_paused(1.0, now=1.2) == [AskTurnEnd(1)]
    assert call.phase is CallPhase.USER_SPEAKING  # still the user's turn while the model thinks
    assert call.turn_judged(1, True, 0.93, 61.0, 1.27) == [EndUtterance()]
    assert call.phase is CallPhase.TRANSCRIBING
    end = call.turn_end
    assert end is not None and (end.t, end.by, end.probability, end.model_ms) == (1.27, "smart", 0.93, 61.0)
    assert call.transcript("I would like a coffee.", 1.5) == [SendTurn("I would like a coffee.")]


def test_an_incomplete_verdict_keeps_listening_and_the_fallback_ends_the_turn():
    call = speaking()
    call.speech_paused(1.0)
    assert call.turn_judged(1, False, 0.12, 58.0, 1.27) == []
    assert call.phase is CallPhase.USER_SPEAKING
    assert call.tick(1.0 + FALLBACK_SILENCE_S - 0.01) == []
    assert call.tick(1.0 + FALLBACK_SILENCE_S) == [EndUtterance()]
    assert call.turn_end.by == "fallback" and call.turn_end.probability == 0.12
    assert call.tick(9.0) == []  # once


def test_speech_after_a_pause_continues_the_same_utterance():
    call = speaking()
    call.speech_paused(1.0)
    call.turn_judged(1, False, 0.2, 50.0, 1.25)
    assert call.speech_start(1.8) == []  # no new BeginUtterance: the same utterance goes on
    assert call.phase is CallPhase.USER_SPEAKING
    assert call.tick(1.0 + FALLBACK_SILENCE_S + 1) == []  # the old pause's fallback is gone
    assert call.speech_paused(3.0) == [AskTurnEnd(2)]
    assert call.turn_judged(2, True, 0.9, 50.0, 3.3) == [EndUtterance()]


def test_a_verdict_on_an_earlier_pause_or_after_the_turn_is_ignored():
    call = speaking()
    call.speech_paused(1.0)
    call.speech_start(1.1)  # the user went on before the model answered
    assert call.turn_judged(1, True, 0.99, 70.0, 1.3) == []
    assert call.phase is CallPhase.USER_SPEAKING
    call.speech_paused(2.0)
    assert call.turn_judged(1, True, 0.99, 70.0, 2.3) == []  # still about the first pause
    assert call.mute(True, 2.1) == [EndUtterance()] and call.turn_end.by == "mute"
    assert call.turn_judged(2, True, 0.99, 70.0, 2.3) == []  # the turn ended otherwise meanwhile


def test_a_failed_model_falls_back_to_the_silence_rule_wait():
    call = speaking()
    call.speech_paused(1.0)
    assert call.turn_judged(1, None, 0.0, 0.0, 1.3) == []
    assert call.tick(1.0 + SILENCE_END_S - 0.01) == []
    assert call.tick(1.0 + SILENCE_END_S) == [EndUtterance()] and call.turn_end.by == "silence"
    call2 = speaking()
    call2.speech_paused(1.0)
    assert call2.turn_judged(1, None, 0.0, 0.0, 1.0 + SILENCE_END_S + 0.1) == [EndUtterance()]  # already past it


def test_the_silence_rule_and_push_to_talk_record_how_the_turn_ended():
    call = speaking()
    assert call.speech_end(1.0, now=1.5) == [EndUtterance()]
    assert (call.turn_end.t, call.turn_end.by) == (1.5, "silence")
    assert call.speech_end(2.0) == []
    ptt = CallState(CallMode.PUSH_TO_TALK)
    ptt.key_down(0.0)
    assert ptt.speech_paused(0.5) == []  # a pause in speech does not end a held key's turn
    assert ptt.key_up(1.0) == [EndUtterance()] and ptt.turn_end.by == "key"


def test_barge_in_is_still_the_vad_start_and_pauses_outside_a_turn_do_nothing():
    call = speaking()
    call.speech_paused(1.0)
    call.turn_judged(1, True, 0.9, 60.0, 1.3)
    call.transcript("Tell me a story.", 1.5)
    assert call.speech_paused(2.0) == [] and call.tick(9.0) == []  # nothing to judge while it replies
    call.reply_started(3.0)
    assert call.speech_start(4.0) == [StopReply("barge_in"), BeginUtterance()]
    assert call.pause(4.5) == [CancelUtterance()]
    assert call.speech_paused(5.0) == [] and call.phase is CallPhase.PAUSED
    turns = speaking(CallMode.TURNS)
    turns.speech_paused(1.0)
    turns.turn_judged(1, True, 0.9, 60.0, 1.3)
    turns.transcript("Hi", 1.4)
    turns.reply_started(2.0)
    assert turns.speech_start(3.0) == [] and turns.speech_paused(3.5) == []  # turn-taking: never interrupted


# ---------------------------------------------------------------- EndOfTurn: the judge's part



class Model:
    def __init__(self, complete: bool | None) -> None:
        self.complete, self.audio, self.threads = complete, [], []

    def predict(self, audio):
        self.audio.append(audio)
        self.threads.append(threading.current_thread().name)
        if self.complete is None:
            raise RuntimeError("broken")
        return TurnVerdict(self.complete, 0.8, 3.0)


def judged(model: Model, inline: bool = True, words=None):
    clock = VirtualClock(start=10.0)
    state = CallState()
    actions: list = []
    taking = TurnTaking(state, clock, lambda e: None, actions.extend)
    return state, EndOfTurn(model, taking, inline=inline, words=words), actions


def test_the_judge_gives_the_model_the_turn_so_far_with_its_pre_roll():
    model = Model(True)
    state, judge, actions = judged(model)
    frame = lambda k: np.full(320, k, np.float32)  # noqa: E731 - frame k holds the value k
    for k in range(100):  # 2 s before the utterance
        judge.hear(frame(k))
    judge.begin()
    state.speech_start(0.0)
    for k in range(100, 150):
        judge.hear(frame(k))
    judge.ask(state.speech_paused(11.0)[0])
    (audio,) = model.audio
    assert audio.size == int(PRE_ROLL_S * RATE) + 50 * 320  # the pre-roll, then the utterance
    assert audio[0] == 100 - PRE_ROLL_S * RATE / 320 and audio[-1] == 149
    assert actions == [EndUtterance()] and state.turn_end.by == "smart" and state.turn_end.t == 10.0
    for k in range(150, 150 + int(KEEP_S * RATE / 320) + 7):  # a long turn: its last 8 s, in order
        judge.hear(frame(k))
    assert np.array_equal(np.unique(judge.turn_audio()[::320]), np.arange(k + 1 - int(KEEP_S * RATE / 320), k + 1))


def test_a_broken_model_leaves_the_silence_rule_and_the_thread_is_not_the_callers():
    model = Model(None)
    state, judge, actions = judged(model)
    state.speech_start(0.0)
    judge.hear(np.ones(320, np.float32))
    judge.ask(state.speech_paused(9.0)[0])  # at 10.0: 1 s after the last voiced sample: past 0.5 s
    assert actions == [EndUtterance()] and state.turn_end.by == "silence" and judge.asked == 0
    model = Model(False)
    state, judge, actions = judged(model, inline=False)
    state.speech_start(0.0)
    judge.hear(np.ones(320, np.float32))
    judge.ask(state.speech_paused(9.9)[0])
    for _ in range(500):
        if judge.asked:
            break
        threading.Event().wait(0.01)
    judge.close()
    assert judge.asked == 1 and model.threads[0].startswith("end-of-turn") and actions == []
    assert state.phase is CallPhase.USER_SPEAKING  # incomplete: still listening


@pytest.mark.parametrize("text, ends", [("I would like to", False), ("So, um", False), ("Thanks, that is all.", True),
                                        (None, True)])
def test_words_that_leave_the_sentence_open_keep_a_complete_sounding_turn_open(text, ends):
    state, judge, actions = judged(Model(True), words=lambda: text)
    state.speech_start(0.0)
    judge.hear(np.ones(320, np.float32))
    judge.ask(state.speech_paused(9.9)[0])
    assert (actions == [EndUtterance()]) is ends
    assert judge.held_open == (0 if ends else 1)
    assert state.phase is (CallPhase.TRANSCRIBING if ends else CallPhase.USER_SPEAKING)


def test_words_that_cannot_be_read_leave_the_models_verdict():
    def broken():
        raise TimeoutError("no transcript")

    state, judge, actions = judged(Model(True), words=broken)
    state.speech_start(0.0)
    judge.hear(np.ones(320, np.float32))
    judge.ask(state.speech_paused(9.9)[0])
    assert actions == [EndUtterance()] and judge.held_open == 0


@pytest.mark.parametrize("text, ends", [("What should I visit first?", True), ("I went to the", False),
                                        ("I went to the shop.", False), (None, False)])
def test_a_finished_question_ends_a_turn_the_model_was_unsure_of(text, ends):
    state, judge, actions = judged(Model(False), words=lambda: text)
    state.speech_start(0.0)
    judge.hear(np.ones(320, np.float32))
    judge.ask(state.speech_paused(9.9)[0])
    assert (actions == [EndUtterance()]) is ends and judge.questions == int(ends)
