"""The cache invariant for drafts (issue 21): a voice call's partial transcripts go into its session
as drafts that grow, are edited mid-word, withdrawn or stopped mid-prefill; the turn ends with
the final words in the reply's own command (or appended, or the draft made final), or is
cancelled; a barge-in may cut the reply. After every turn the session holds exactly the ids of
its final messages, and each reply equals an uncached greedy run over them (fp32)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from worker_helpers import make_client

from desktop.model.messages import Message
from desktop.model.params import SamplingParams
from desktop.protocol import AppendInput, CreateSession, Done, Generate, PrefillProgress, Stop, TruncateReply

TEXT = st.text(alphabet=list("abcdefghij klmnop.,?!é日本🙂"), min_size=1, max_size=24)
DRAFTS = st.lists(
    st.one_of(
        st.tuples(st.just("grow"), st.integers(1, 24)),  # the final words' first n characters (cut mid-word)
        st.tuples(st.just("edit"), TEXT),  # a partial the final words do not keep
        st.tuples(st.just("withdraw"), st.just(0)),  # a barge-in or cancel with no words: final[:0]
        st.tuples(st.just("stop"), st.integers(1, 24)),  # a draft stopped while it is prefilled
    ),
    max_size=5,
)
TURNS = st.lists(
    st.tuples(TEXT, DRAFTS, st.sampled_from(["generate", "finalise", "append", "cancel"]),
              st.sampled_from(["none", "truncate"]), st.floats(0, 1)),
    min_size=1,
    max_size=3,
)
MAX = 6


@pytest.mark.parametrize("runner", ["hf", "static"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(system=st.one_of(st.none(), TEXT), turns=TURNS)
def test_drafts_leave_the_session_as_the_final_words_alone(tiny_lm, oracle, system, turns, runner):
    t = tiny_lm.template
    client = make_client(tiny_lm, num_slots=2, prefill_chunk=4, prefill_budget=4, runner=runner)
    assert isinstance(client.run(CreateSession("c", "s", system))[-1], Done)
    session = client.worker.scheduler.sessions["s"]
    history = [Message("system", system)] if system else []
    ids = t.encode(history).ids if history else []
    n = 0

    def send(cmd, stop: bool = False) -> Done:
        events = []
        for event in client.stream(cmd):
            if stop and isinstance(event, PrefillProgress):
                client.submit(Stop(cmd.request_id))
                stop = False
            events.append(event)
        assert isinstance(events[-1], Done), events[-1]
        return events[-1]

    for final, drafts, ending, cut, heard_part in turns:
        for kind, arg in drafts:
            n += 1
            text = arg if kind == "edit" else final[:arg]
            msgs = (Message("user", text),) if text else ()
            send(AppendInput(f"d{n}", "s", msgs, draft=True), stop=kind == "stop")
        user = Message("user", final)
        n += 1
        if ending == "cancel":  # the turn is dropped: its draft withdrawn
            send(AppendInput(f"w{n}", "s", (), draft=True))
            assert session.slot.ids + session.pending == ids and session.history == history
            continue
        if ending == "generate":
            cmd = Generate(f"g{n}", "s", SamplingParams(max_tokens=MAX), (user,))
        else:
            send(AppendInput(f"a{n}", "s", (user,), draft=ending == "finalise"))
            cmd = Generate(f"g{n}", "s", SamplingParams(max_tokens=MAX))
        done = send(cmd)
        ids += t.encode_delta(history, [user]).ids
        history.append(user)
        expected = oracle.ids(ids + t.gen_prompt_ids, MAX)
        assert list(done.token_ids) == expected, (final, drafts, ending)
        reply_at = len(ids)
        ids += t.gen_prompt_ids + expected + t.close_after_reply(expected)
        history.append(Message("assistant", done.text))
        if cut == "truncate":  # a barge-in: the reply becomes what was heard
            words = done.text.split()
            heard = " ".join(words[: int(len(words) * heard_part)])
            assert isinstance(client.run(TruncateReply(f"t{n}", "s", heard))[-1], Done)
            del ids[reply_at:]
            history.pop()
            if heard:
                ids += t.encode_delta(history, [Message("assistant", heard)]).ids
                history.append(Message("assistant", heard))
        assert session.slot.ids + session.pending == ids and session.history == history and session.draft is None
