"""Raw prompts (Chat.raw, the API's /v1/completions): the text tokenised as is, no chat template,
no generation prompt; the KV of an earlier prompt (and its completion) is reused by token prefix,
and the output with that cache equals the output without it (greedy, fp32), mixed with chats."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from worker_helpers import make_client

from desktop.protocol import Chat, Done, ErrorEvent
from desktop.model.messages import Message
from desktop.model.params import SamplingParams

MAX = 5
BASE = "Once upon a time, in a land of rivers and hills, there lived a baker who "
TEXT = st.text(alphabet=list("abcdefghij klmnop.,?!é日\n"), min_size=1, max_size=30)
OPS = st.one_of(
    st.tuples(st.just("extend"), TEXT),  # the last prompt + its completion + more text
    st.tuples(st.just("fresh"), TEXT),  # a prompt that only shares BASE
    st.tuples(st.just("markers"), TEXT),  # template markers written in the prompt are markers
    st.tuples(st.just("chat"), TEXT),  # a chat turn in between (its own template, same slots)
)


def raw(rid: str, prompt: str, max_tokens: int = MAX) -> Chat:
    return Chat(rid, (Message("user", prompt),), SamplingParams(max_tokens=max_tokens), origin="api", raw=True)


def run(client, cmd: Chat) -> Done:
    done = client.run(cmd)[-1]
    assert isinstance(done, Done), done
    return done


def raw_ids(lm, prompt: str) -> list[int]:
    """The oracle's own tokenisation of a raw prompt (the tokenizer's way, special tokens on)."""
    return list(lm.tokenizer(prompt, add_special_tokens=True)["input_ids"])


@pytest.mark.parametrize("runner", ["hf", "static"])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(mode=st.sampled_from(["imc+spc", "imc", "off"]), num_slots=st.integers(1, 3), ops=st.lists(OPS, min_size=1, max_size=6))
def test_raw_cached_equals_uncached(tiny_lm, oracle, mode, num_slots, ops, runner):
    client = make_client(tiny_lm, num_slots=num_slots, cache_mode=mode, cache_min_tokens=8, prefill_chunk=16,
                         prefill_budget=24, runner=runner)
    last = BASE
    for n, (kind, text) in enumerate(ops):
        if kind == "chat":
            msgs = [Message("user", text)]
            done = run(client, Chat(f"c{n}", tuple(msgs), SamplingParams(max_tokens=MAX)))
            assert list(done.token_ids) == oracle.chat(msgs, MAX)
            continue
        prompt = {"extend": last + text, "fresh": BASE + text,
                  "markers": f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"}[kind]
        done = run(client, raw(f"r{n}", prompt))
        assert list(done.token_ids) == oracle.ids(raw_ids(tiny_lm, prompt), MAX), (mode, kind, done.stats)
        assert done.stats.input_tokens == len(raw_ids(tiny_lm, prompt))
        last = prompt + done.text


def test_extension_reuses_the_kv_by_token_prefix(tiny_lm, oracle):
    """A second completion that extends the first prompt (and its completion) reads only what is new."""
    client = make_client(tiny_lm, num_slots=2, cache_min_tokens=8, prefill_chunk=16)
    first = run(client, raw("a", BASE * 2, 6))
    assert first.stats.cached_tokens == 0
    prompt = BASE * 2 + first.text + " and then"
    second = run(client, raw("b", prompt, 6))
    shared = len(raw_ids(tiny_lm, BASE * 2))
    assert second.stats.cached_tokens >= shared, second.stats
    assert list(second.token_ids) == oracle.ids(raw_ids(tiny_lm, prompt), 6)
    cold = run(make_client(tiny_lm, num_slots=1, cache_mode="off"), raw("c", prompt, 6))
    assert cold.stats.cached_tokens == 0 and cold.token_ids == second.token_ids


def test_a_raw_prompt_gets_no_template(tiny_lm):
    """The prompt's ids are its text's: not the chat template around a user message."""
    client = make_client(tiny_lm, num_slots=1)
    done = run(client, raw("a", "Hello there", 2))
    assert done.stats.input_tokens == len(raw_ids(tiny_lm, "Hello there"))
    assert done.stats.input_tokens < len(tiny_lm.template.prompt_ids([Message("user", "Hello there")]))


def test_an_empty_raw_prompt_is_refused(tiny_lm):
    client = make_client(tiny_lm, num_slots=1)
    end = client.run(Chat("e", (Message("user", "a"), Message("user", "b")), SamplingParams(max_tokens=2), raw=True))[-1]
    assert isinstance(end, ErrorEvent) and end.code == "invalid_request", end
