"""Issue 22 §2, calls: a session past a small window slides by the chats' rule (slide.py) inside
the worker, so a call never ends for length; every turn is answered and equals an uncached run
over the messages the model still sees. The tiny model with its window made small."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from worker_helpers import Oracle, make_client

from desktop.model.messages import Message
from desktop.model.params import SamplingParams
from desktop.protocol import AppendInput, CreateSession, Done, Generate, PrefillDone
from desktop.workers.slide import view_start

WINDOW = 160
TEXT = st.text(alphabet=list("abcdefghij klmnop.,?"), min_size=1, max_size=30)


@pytest.fixture(scope="module")
def small(tiny_lm):
    return dataclasses.replace(tiny_lm, context_length=WINDOW)


@pytest.fixture(scope="module")
def small_oracle(small):
    return Oracle(small)


def expected_start(template, history: list[Message], reply: int) -> int:
    """The chats' rule over the session's messages, with room for the reply prompt and `reply`
    tokens (a Generate's max_tokens, at most a quarter window; 0 for an input alone: a draft)."""
    bounds = template.encode(history).bounds
    lengths = [b - a for a, b in zip([0, *bounds[:-1]], bounds)]
    return view_start(lengths, [m.role for m in history], len(template.gen_prompt_ids) + reply, WINDOW)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(turns=st.lists(st.tuples(TEXT, st.booleans(), st.integers(1, 10)), min_size=10, max_size=18),
       system=st.sampled_from([None, "You are a helpful assistant."]), runner=st.sampled_from(["hf", "static"]))
def test_a_long_call_slides_and_every_turn_is_answered(small, small_oracle, turns, system, runner):
    t = small.template
    client = make_client(small, num_slots=2, prefill_chunk=32, runner=runner)
    assert isinstance(client.run(CreateSession("c", "s", system))[-1], Done)
    history = [Message("system", system)] if system else []
    ids = t.encode(history).ids if history else []
    start, slides = 0, 0
    for n, (text, drafted, limit) in enumerate(turns):
        msg = Message("user", text)
        events, inputs = [], [msg]
        if drafted:  # the partial transcript first, then the final words replace it
            inputs.append(Message("user", text[: len(text) // 2 + 1]))
            events += client.run(AppendInput(f"d{n}", "s", tuple(inputs[-1:]), draft=True))
            assert isinstance(events[-1], Done), events[-1]
        events += client.run(Generate(f"g{n}", "s", SamplingParams(max_tokens=limit), (msg,)))
        done = events[-1]
        assert isinstance(done, Done), done  # never an error for length
        for prefill in [e for e in events if isinstance(e, PrefillDone)]:
            if prefill.slid:  # the draft's turn or the final words' turn rebuilt the view
                slides += 1
                assert prefill.window_start > start
                start = prefill.window_start  # the chats' rule over the session's messages then
                assert start in {expected_start(t, history + [inputs[-1]], 0),
                                  expected_start(t, history + [msg], min(limit, WINDOW // 4))}
                ids = t.encode(history[: 1 if system else 0] + history[start:]).ids
            assert prefill.window_start == start
        ids += t.encode_delta(history, [msg]).ids
        assert len(ids) + len(t.gen_prompt_ids) < WINDOW
        assert list(done.token_ids) == small_oracle.ids(ids + t.gen_prompt_ids, limit), (n, start)
        history.append(msg)
        out = list(done.token_ids)
        if out:
            history.append(Message("assistant", done.text))
        ids += t.gen_prompt_ids + out + t.close_after_reply(out)
    tokens = len(t.encode(history).ids)
    if tokens > WINDOW:
        assert slides >= 1
    assert slides <= max(1, tokens // (WINDOW // 4))
