"""Voice-call turn logic (issue 10): modes, barge-in, pause, mute, force-listen, idle timeout; and
the text a barge-in keeps (what the user heard of the reply)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from desktop.call.state import (
    BeginUtterance, CallMode, CancelUtterance, CallPhase, CallState, EndCall, EndUtterance, SendTurn, StopReply,
)
from desktop.speech.heard import SpokenLog


def talk(call: CallState, text: str, t: float) -> list:
    """The user says `text` (VAD start/end, then the final transcript); all actions returned."""
    return call.speech_start(t) + call.speech_end(t + 1) + call.transcript(text, t + 1.5)


def test_duplex_turn_then_barge_in():
    call = CallState(CallMode.DUPLEX)
    assert talk(call, " Hello there ", 0) == [BeginUtterance(), EndUtterance(), SendTurn("Hello there")]
    assert call.phase is CallPhase.THINKING
    call.reply_started(2.0)
    assert call.phase is CallPhase.SPEAKING
    assert call.speech_start(3.0) == [StopReply("barge_in"), BeginUtterance()]
    assert call.phase is CallPhase.USER_SPEAKING and call.barge_ins == 1
    # speech while the reply is still being generated (no audio yet) also interrupts it
    call.speech_end(4.0)
    call.transcript("Wait", 4.5)
    assert call.speech_start(4.6) == [StopReply("barge_in"), BeginUtterance()]


def test_turn_taking_never_interrupts_the_assistant():
    call = CallState(CallMode.TURNS)
    talk(call, "Hi", 0)
    call.reply_started(2)
    assert call.speech_start(3) == [] and call.speech_end(4) == []
    assert call.phase is CallPhase.SPEAKING
    call.reply_finished(5)
    assert talk(call, "Next", 6)[-1] == SendTurn("Next")


def test_push_to_talk_is_the_key_not_the_voice():
    call = CallState(CallMode.PUSH_TO_TALK)
    assert call.speech_start(0) == [] and call.phase is CallPhase.LISTENING
    assert call.key_down(1) == [BeginUtterance()]
    assert call.speech_end(1.5) == []  # a pause in speech does not end a held key's turn
    assert call.key_up(3) == [EndUtterance()]
    assert call.transcript("Tell me more", 3.4) == [SendTurn("Tell me more")]
    call.reply_started(4)
    assert call.key_down(5) == [StopReply("barge_in"), BeginUtterance()]


def test_empty_transcript_goes_back_to_listening():
    call = CallState()
    assert talk(call, "   ", 0) == [BeginUtterance(), EndUtterance()]
    assert call.phase is CallPhase.LISTENING


def test_pause_mute_force_listen_and_idle_timeout():
    call = CallState(idle_timeout_s=60)
    talk(call, "Hi", 0)
    call.reply_started(2)
    assert call.force_listen(3) == [StopReply("force_listen")] and call.phase is CallPhase.LISTENING
    talk(call, "Again", 4)
    assert call.pause(6) == [StopReply("paused")] and call.phase is CallPhase.PAUSED
    assert call.speech_start(7) == [] and call.transcript("late", 7) == []
    call.resume(8)
    call.mute(True, 9)
    assert call.speech_start(10) == []
    call.mute(False, 11)
    call.speech_start(12)
    assert call.mute(True, 13) == [EndUtterance()]  # muting mid-utterance sends what was said
    assert call.transcript("Bye", 13.5) == [SendTurn("Bye")]
    call.reply_finished(15)
    call.mute(False, 15)
    assert call.tick(74.9) == [] and call.tick(75.0) == [EndCall("idle")]
    assert call.phase is CallPhase.ENDED and call.speech_start(80) == [] and call.end(81) == []


def test_end_while_speaking_stops_the_reply_first():
    call = CallState()
    talk(call, "Hi", 0)
    assert call.end(2) == [StopReply("ended"), EndCall("user")]


def test_pause_or_end_mid_utterance_drops_it():
    call = CallState()
    call.speech_start(0)
    assert call.speech_start(0.5) == []  # already collecting
    assert call.pause(1) == [CancelUtterance()]
    call.resume(2)
    call.speech_start(3)
    assert call.end(4) == [CancelUtterance(), EndCall("user")]


EVENTS = st.lists(st.tuples(st.sampled_from(["speech_start", "speech_end", "key_down", "key_up", "transcript",
                                              "reply_started", "reply_finished", "force_listen", "pause", "resume",
                                              "mute", "unmute", "tick", "mode"]),
                            st.sampled_from(list(CallMode))), max_size=40)


@settings(max_examples=200, deadline=None)
@given(mode=st.sampled_from(list(CallMode)), events=EVENTS)
def test_call_invariants(mode, events):
    """Whatever happens: a reply is stopped only while one is under way, a turn is sent only from
    a finished utterance, utterances begin and end in pairs, turn-taking never barges in, and an
    ended call does nothing more."""
    call = CallState(mode, idle_timeout_s=5)
    open_utterance, t = False, 0.0
    for name, new_mode in events:
        t += 1.0
        before, muted_mode = call.phase, call.mode
        if name == "transcript":
            actions = call.transcript("words", t)
        elif name in ("mute", "unmute"):
            actions = call.mute(name == "mute", t)
        elif name == "mode":
            actions = call.set_mode(new_mode)
        else:
            actions = getattr(call, name)(t)
        if before is CallPhase.ENDED:
            assert actions == []
        for a in actions:
            if isinstance(a, StopReply):
                assert before in (CallPhase.THINKING, CallPhase.SPEAKING), (name, before)
                if a.reason == "barge_in":
                    assert muted_mode is not CallMode.TURNS
            if isinstance(a, SendTurn):
                assert before is CallPhase.TRANSCRIBING and name == "transcript"
            if isinstance(a, BeginUtterance):
                assert not open_utterance
                open_utterance = True
            if isinstance(a, (EndUtterance, CancelUtterance)):
                assert open_utterance
                open_utterance = False
        assert open_utterance == (call.phase is CallPhase.USER_SPEAKING)


def test_heard_text_whole_segments_then_words_of_the_cut_one():
    log = SpokenLog()
    log.add_segment(0, "Hello there.")
    log.add_audio(0, 16000, 16000)  # 1.0 s
    log.add_segment(1, "I am a small model running on your computer.")
    log.add_audio(1, 22050 * 2, 22050)  # 4.0 s in two chunks
    log.add_audio(1, 22050 * 2, 22050)
    assert log.seconds == 5.0 and log.spoken_text.startswith("Hello there. I am")
    assert log.heard_text(0.4) == "" and log.heard_text(0.5) == "Hello"
    assert log.heard_text(1.0) == "Hello there."
    assert log.heard_text(3.0) == "Hello there. I am a small"  # half of 9 words, rounded down
    assert log.heard_text(99) == log.spoken_text
    assert SpokenLog().heard_text(3) == ""


class Speaker:
    """What the ducker uses of the Voice: duck() silences, unduck() gives the user's volume back."""

    available = True

    def __init__(self) -> None:
        self.volume = 0.8

    def duck(self) -> None:
        self.volume = 0.0

    def unduck(self) -> None:
        self.volume = 0.8


def test_ducking_mutes_on_a_sudden_rise_and_comes_back_unless_confirmed():
    from desktop.call.duck import Ducker

    sink = Speaker()
    duck = Ducker(sink, rise_db=12, floor_db=-50, hold_s=0.3)
    for i in range(100):  # the assistant speaks; the cleaned microphone holds residual echo
        duck.frame(-72.0 + (i % 3), i * 0.01, speaking=True)
    assert sink.volume == 0.8 and not duck.ducked and duck.background < -66
    duck.frame(-52.0, 1.0, speaking=True)  # far over the background, but under the floor
    assert not duck.ducked
    duck.frame(-30.0, 1.02, speaking=True)  # the user starts talking: silent at once
    assert duck.ducked and sink.volume == 0.0 and duck.ducks == 1
    duck.frame(-30.0, 1.2, speaking=True)
    assert sink.volume == 0.0
    duck.frame(-60.0, 1.33, speaking=True)  # no VAD confirmation within 0.3 s: a cough
    assert not duck.ducked and sink.volume == 0.8
    duck.frame(-20.0, 1.4, speaking=True)
    duck.release()  # a confirmed barge-in stopped the reply: volume back for the next one
    assert sink.volume == 0.8
    duck.frame(-10.0, 1.5, speaking=False)  # nothing plays: nothing to duck
    assert not duck.ducked


def test_ducking_on_the_double_talk_detector_and_its_false_alarms():
    from desktop.call.duck import Ducker

    sink, alarms = Speaker(), []
    duck = Ducker(sink, hold_s=0.3, on_false_alarm=lambda: alarms.append(1))
    duck.frame(-70.0, 0.0, speaking=True, near_talk=True)  # quiet after the AEC, but the user talks
    assert duck.ducked and sink.volume == 0.0
    duck.frame(-70.0, 0.31, speaking=True)  # the VAD never confirmed it
    assert not duck.ducked and sink.volume == 0.8 and alarms == [1] and duck.false_alarms == 1
    duck.frame(-70.0, 0.4, speaking=True, near_talk=True)
    duck.release()  # confirmed: the reply stops; not a false alarm
    assert alarms == [1] and sink.volume == 0.8
    duck.frame(-70.0, 0.5, speaking=False, near_talk=True)  # nothing plays: nothing to duck
    assert not duck.ducked
