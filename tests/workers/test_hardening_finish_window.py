"""Issue 19, new-user item 2, the worker side: a reply cut by its own limit (max_tokens) ends with
finish_reason "length", one cut because prompt + reply filled the context window with "window"
(both said "length" before), on the tiny model (2,048-token window)."""

from __future__ import annotations

import pytest

from desktop.model.messages import Message
from desktop.model.params import SamplingParams
from desktop.protocol import Chat, Done, FinishReason
from worker_helpers import make_client

pytestmark = pytest.mark.hardening


def ask(client, rid: str, text: str, max_tokens: int) -> Done:
    done = client.run(Chat(rid, (Message("user", text),), SamplingParams(max_tokens=max_tokens, ignore_eos=True)))[-1]
    assert isinstance(done, Done), done
    return done


def test_the_reply_limit_and_the_full_window_are_told_apart(tiny_lm):
    client = make_client(tiny_lm, num_slots=1)
    window = tiny_lm.context_length
    short = ask(client, "a", "Hello there", 6)
    assert short.stats.finish_reason == FinishReason.LENGTH.value == "length" and short.stats.generated_tokens == 6
    words = 10
    while len(tiny_lm.template.prompt_ids([Message("user", " ".join(["w"] * words))])) < window - 5:
        words += 10
    words -= 10  # the longest prompt in steps of ten that leaves a few tokens for the reply
    text = " ".join(["w"] * words)
    prompt = len(tiny_lm.template.prompt_ids([Message("user", text)]))
    assert prompt < window
    full = ask(client, "b", text, 512)
    assert full.stats.finish_reason == FinishReason.WINDOW.value == "window", full.stats
    assert full.stats.generated_tokens == window - prompt < 512
    assert full.stats.input_tokens + full.stats.generated_tokens == window
