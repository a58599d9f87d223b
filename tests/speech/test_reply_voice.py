"""ReplyVoice: the stream's own deltas reach the voice unchanged; a silenced or ended reply never
speaks again; the chat's engine Reply is followed through its listeners."""

from desktop.speech.finished import FinishedReplies
from desktop.speech.reply_voice import ReplyVoice


class FakeVoice:
    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.finished = FinishedReplies()

    def speak_begin(self, rid):
        self.calls.append(("begin", rid))

    def speak_delta(self, rid, text):
        self.calls.append(("delta", rid, text))

    def speak_end(self, rid):
        self.calls.append(("end", rid))

    def stop(self, rid=None):
        self.calls.append(("stop", rid))


class FakeReply:
    """The parts of chat.reply.Reply a ReplyVoice reads."""

    def __init__(self, rid: str) -> None:
        self.request_id, self.text, self.delta, self.listeners = rid, "", "", []

    def chunk(self, delta: str) -> None:
        self.delta, self.text = delta, self.text + delta
        self.tell("text")

    def tell(self, what: str) -> None:
        for listener in list(self.listeners):
            listener(self, what)


def test_deltas_go_to_the_voice_as_they_came():
    voice = FakeVoice()
    began: list[str] = []
    rv = ReplyVoice(voice, on_begin=began.append)
    reply = FakeReply("r1")
    rv.follow(reply)
    for d in ["Hel", "lo, wor", "ld. ", "Bye"]:
        reply.chunk(d)
    reply.tell("done")
    assert voice.calls == [("begin", "r1"), ("delta", "r1", "Hel"), ("delta", "r1", "lo, wor"),
                           ("delta", "r1", "ld. "), ("delta", "r1", "Bye"), ("end", "r1")]
    assert began == ["r1"] and rv.current is None
    reply.chunk(" more")  # an ended reply never speaks again
    assert voice.calls[-1] == ("end", "r1")


def test_voice_turned_on_mid_reply_speaks_all_so_far_then_deltas():
    voice, on = FakeVoice(), [False]
    rv = ReplyVoice(voice, enabled=lambda: on[0])
    reply = FakeReply("r1")
    rv.follow(reply)
    reply.chunk("One. ")
    assert voice.calls == []
    on[0] = True
    reply.chunk("Two. ")
    reply.chunk("Three.")
    assert voice.calls == [("begin", "r1"), ("delta", "r1", "One. Two. "), ("delta", "r1", "Three.")]


def test_silence_keeps_followed_replies_quiet_even_before_their_first_words():
    voice = FakeVoice()
    rv = ReplyVoice(voice)
    a, b = FakeReply("a"), FakeReply("b")
    rv.follow(a)
    a.chunk("Hi")
    rv.follow(b)  # b waits for its first words
    rv.silence()
    a.chunk(" there")
    b.chunk("Hello")
    assert voice.calls == [("begin", "a"), ("delta", "a", "Hi"), ("stop", None)]
    c = FakeReply("c")
    rv.follow(c)  # a reply followed after the silence speaks
    c.chunk("Yes")
    assert voice.calls[-2:] == [("begin", "c"), ("delta", "c", "Yes")]


def test_end_adds_the_final_text_the_stream_did_not_carry_and_drop_stops_played_audio():
    voice = FakeVoice()
    rv = ReplyVoice(voice)
    rv.begin("r1")
    rv.delta("r1", "Paris is")
    rv.end("r1", "Paris is big.")
    assert voice.calls[-2:] == [("delta", "r1", " big."), ("end", "r1")]
    rv.drop("r1")  # talked over while its audio still plays: silenced although its text ended
    assert voice.calls[-1] == ("stop", "r1")
    rv.delta("r1", "late")
    assert voice.calls[-1] == ("stop", "r1")


def test_a_failed_or_empty_reply_is_dropped():
    voice = FakeVoice()
    rv = ReplyVoice(voice)
    reply = FakeReply("r1")
    rv.follow(reply)
    reply.chunk("Half")
    reply.tell("failed")
    assert voice.calls[-1] == ("stop", "r1") and rv.current is None
    empty = FakeReply("r2")
    rv.follow(empty)
    empty.tell("done")
    assert voice.calls[-1] == ("stop", "r2")


ADD = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]


def spoken(voice: FakeVoice) -> str:
    return "".join(c[2] for c in voice.calls if c[0] == "delta")


def test_a_reply_that_calls_a_tool_speaks_its_prose_and_never_the_calls_json():
    voice = FakeVoice()
    rv = ReplyVoice(voice)
    reply = FakeReply("r1")
    reply.tools = ADD
    rv.follow(reply)
    for d in ["I will ", "add them.", "\n<tool", "_call>\n{\"name\": \"add\", ", "\"arguments\": {\"a\": 2}}", "\n</tool_call>"]:
        reply.chunk(d)
    reply.tell("done")
    assert spoken(voice).strip() == "I will add them." and voice.calls[-1] == ("end", "r1")
    assert not any("{" in c[2] or "<" in c[2] for c in voice.calls if c[0] == "delta")


def test_a_reply_that_is_only_a_call_says_nothing_and_one_that_only_looked_like_one_is_spoken_at_its_end():
    voice = FakeVoice()
    rv = ReplyVoice(voice)
    call = FakeReply("r1")
    call.tools = ADD
    rv.follow(call)
    for d in ['{"name": "add", ', '"arguments": {"a": 1, "b": 2}}']:
        call.chunk(d)
    call.tell("done")
    assert spoken(voice) == "" and ("end", "r1") not in voice.calls
    listed = FakeReply("r2")
    listed.tools = ADD
    rv.follow(listed)
    for d in ["[1] apples", ", [2] pears"]:
        listed.chunk(d)
    assert spoken(voice) == ""  # held back while it may still be a call
    listed.tell("done")
    assert spoken(voice) == "[1] apples, [2] pears" and voice.calls[-1] == ("end", "r2")
