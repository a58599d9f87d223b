"""Issue 22 §2: a conversation past a small window slides (the oldest messages leave the model's
view, the system prompt stays) and the output stays exact: cached == uncached over the messages
the model still sees, integrity checked after every step, and the view is rebuilt rarely (at
most once per block of growth). The tiny model with its window made small."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from worker_helpers import Oracle, make_client

from desktop.model.messages import Message
from desktop.model.params import SamplingParams
from desktop.protocol import CacheReason, Chat, Done, ErrorEvent, PrefillDone
from desktop.workers.slide import view_start

WINDOW = 192
MAX = 6
TEXT = st.text(alphabet=list("abcdefghij klmnop.,?!é\n"), min_size=1, max_size=30)


@pytest.fixture(scope="module")
def small(tiny_lm):
    return dataclasses.replace(tiny_lm, context_length=WINDOW)


@pytest.fixture(scope="module")
def small_oracle(small):
    return Oracle(small)


def visible(template, msgs: list[Message], max_tokens: int) -> tuple[list[Message], int]:
    """The view by the rule (slide.py), over the messages' own token counts: the test's side."""
    bounds = template.encode(msgs).bounds
    lengths = [b - a for a, b in zip([0, *bounds[:-1]], bounds)]
    reserve = len(template.gen_prompt_ids) + min(max_tokens, WINDOW // 4)
    start = view_start(lengths, [m.role for m in msgs], reserve, WINDOW)
    system = 1 if msgs[0].role == "system" else 0
    return (msgs[:system] + msgs[start:] if start else msgs), start


def turn(client, rid: str, msgs: list[Message], max_tokens: int = MAX, overflow: str = "slide") -> list:
    return client.run(Chat(rid, tuple(msgs), SamplingParams(max_tokens=max_tokens), overflow=overflow))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(texts=st.lists(TEXT, min_size=8, max_size=26), system=st.booleans(), mode=st.sampled_from(["imc+spc", "imc"]),
       runner=st.sampled_from(["hf", "static"]))
def test_a_conversation_slides_and_stays_exact(small, small_oracle, texts, system, mode, runner):
    client = make_client(small, num_slots=2, cache_mode=mode, cache_min_tokens=8, prefill_chunk=32, runner=runner)
    conv = [Message("system", "You are a helpful assistant.")] if system else []
    t = small.template
    slides, starts = 0, [0]
    for n, text in enumerate(texts):
        msgs = conv + [Message("user", text)]
        events = turn(client, f"r{n}", msgs)
        done = events[-1]
        assert isinstance(done, Done), done
        view, start = visible(t, msgs, MAX)
        assert list(done.token_ids) == small_oracle.chat(view, MAX), (n, start)
        prefill = next(e for e in events if isinstance(e, PrefillDone))
        assert prefill.window_start == start and prefill.input_tokens == len(t.prompt_ids(view))
        assert start >= starts[-1], "the view went back"
        if prefill.slid:
            assert start > starts[-1]  # a rebuild only where the view moved on
            assert prefill.miss_reason == CacheReason.SLID.value  # the badge says why it was read again
            slides += 1
        elif start:  # inside a block: a cheap delta over the cached view
            assert prefill.cached_tokens > len(t.encode(view[:1]).ids)
        starts.append(start)
        conv = msgs + [Message("assistant", done.text)]
    bounds = t.encode(conv).bounds
    assert slides <= max(1, bounds[-1] // (WINDOW // 4))  # at most one slide per block of growth


def test_stop_policy_refuses_and_slide_policy_answers(small):
    client = make_client(small, num_slots=1)
    conv = [Message("system", "Be brief.")]
    for n in range(40):
        conv += [Message("user", f"Question number {n} about foxes and dogs?")]
        if len(small.template.prompt_ids(conv)) > WINDOW:
            break
        conv += [Message("assistant", "An answer of a few words, fine.")]
    stopped = turn(client, "stop", conv, overflow="error")[-1]
    assert isinstance(stopped, ErrorEvent) and stopped.code == "context_length_exceeded", stopped
    assert "Start a new conversation" in stopped.message
    slid = turn(client, "slide", conv)
    assert isinstance(slid[-1], Done)
    prefill = next(e for e in slid if isinstance(e, PrefillDone))
    assert prefill.window_start > 1 and prefill.slid and conv[prefill.window_start].role == "user"


def test_one_message_longer_than_the_window_is_refused_with_a_sentence(small):
    client = make_client(small, num_slots=1)
    msgs = [Message("system", "Be brief."), Message("user", "hi"), Message("assistant", "hello"),
            Message("user", "word " * WINDOW)]
    end = turn(client, "long", msgs)[-1]
    assert isinstance(end, ErrorEvent) and end.code == "context_length_exceeded"
    assert "last message is too long" in end.message and "Traceback" not in end.message


def test_a_bad_overflow_word_is_refused(small):
    end = turn(make_client(small, num_slots=1), "bad", [Message("user", "hi")], overflow="maybe")[-1]
    assert isinstance(end, ErrorEvent) and end.code == "invalid_request"


def test_a_chat_the_stage_did_not_prepare_slides_the_same_at_admission(small, small_oracle):
    """A command sent on unprepared (a Stop flushed the stage) gets the same view, made at admission."""
    conv = [Message("system", "Be brief.")]
    for n in range(30):
        conv += [Message("user", f"Question {n} about foxes?"), Message("assistant", "A few words, fine.")]
    conv.append(Message("user", "And the last one?"))
    prepared = turn(make_client(small, num_slots=1), "p", conv)
    client = make_client(small, num_slots=1)
    client.worker.intake.put(Chat("u", tuple(conv), SamplingParams(max_tokens=MAX)), 0.0, None)
    events = client.stream(None, "u")
    unprepared = list(events)
    view, start = visible(small.template, conv, MAX)
    assert start > 1
    for events in (prepared, unprepared):
        done, prefill = events[-1], next(e for e in events if isinstance(e, PrefillDone))
        assert isinstance(done, Done) and prefill.window_start == start
        assert list(done.token_ids) == small_oracle.chat(view, MAX)
