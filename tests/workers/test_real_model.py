"""On the embedded default (SmolLM2-135M): a 3-turn chat reuses the cache and matches uncached."""

from __future__ import annotations

import pytest
from worker_helpers import chat, make_client

from desktop.model.loader import ModelSpec, load_model
from desktop.model.messages import Message

pytestmark = pytest.mark.real_model


@pytest.fixture(scope="module")
def smol():
    return load_model(ModelSpec("default"))


def test_three_turns_hit_the_cache_and_equal_uncached(smol):
    cached = make_client(smol, num_slots=2)
    uncached = make_client(smol, num_slots=2, cache_mode="off")
    msgs = [Message("system", "You are a helpful assistant."), Message("user", "What is the capital of France?")]
    for turn, follow_up in enumerate(["And of Italy?", "Which of the two is bigger?", None]):
        on = chat(cached, f"on{turn}", msgs, max_tokens=16)
        off = chat(uncached, f"off{turn}", msgs, max_tokens=16)
        assert on.token_ids == off.token_ids, (turn, on.text, off.text)
        if turn:
            assert on.stats.cached_tokens > 0 and on.stats.kind == "extend"
        assert off.stats.cached_tokens == 0
        if follow_up:
            msgs += [Message("assistant", on.text), Message("user", follow_up)]
    assert "Paris" in chat(uncached, "check", msgs[:2], max_tokens=16).text
