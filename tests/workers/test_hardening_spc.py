"""Issue 8, item 5 (nothing slow on the scheduling loop): a long, new system prompt was built into
the System Prompt Cache inside one scheduler step, in one go, while every running reply waited.
Now only a prompt of one prefill chunk is built at once; a longer one is prefilled in chunks by
the first request that uses it and kept for the next ones."""

from __future__ import annotations

import pytest
from worker_helpers import chat, check_integrity, make_client

from desktop.protocol import Chat, ChunkEvent, Done
from desktop.model.messages import Message
from desktop.model.params import SamplingParams

pytestmark = pytest.mark.hardening

LONG_SYSTEM = Message("system", "You are a careful assistant. Answer briefly and clearly. " * 40)


def test_a_long_new_system_prompt_is_prefilled_in_chunks(tiny_lm, oracle):
    client = make_client(tiny_lm, num_slots=3, cache_mode="spc", prefill_chunk=16, prefill_budget=32)
    w = client.worker
    n_system = len(tiny_lm.template.encode([LONG_SYSTEM]).ids)
    assert n_system > 20 * 32  # many ticks' worth of prefill

    forwards = []
    hook = tiny_lm.model.register_forward_hook(lambda *_: forwards.__setitem__(-1, forwards[-1] + 1))
    try:
        running = Chat("a", (Message("user", "Tell me a story."),), SamplingParams(max_tokens=400, ignore_eos=True))
        w.submit(running)
        while not any(isinstance(e, ChunkEvent) for e in client.events["a"]):
            forwards.append(0)
            w.step()
        msgs = [LONG_SYSTEM, Message("user", "Hello there")]
        w.submit(Chat("b", tuple(msgs), SamplingParams(max_tokens=4)))
        while not client.events["b"] or not isinstance(client.events["b"][-1], Done):
            forwards.append(0)
            w.step()
            check_integrity(w)
    finally:
        hook.remove()
    first = client.events.pop("b")[-1]
    # every step: at most the prefill budget's chunks plus the one batched decode step
    assert max(forwards) <= 32 // 16 + 1, max(forwards)
    assert (first.stats.kind, first.stats.cached_tokens) == ("miss", 0)  # nothing was cached yet: told truly
    assert list(first.token_ids) == oracle.chat(msgs, 4)

    second_msgs = [LONG_SYSTEM, Message("user", "Another conversation")]
    second = chat(client, "c", second_msgs, 4)
    assert (second.stats.kind, second.stats.cached_tokens) == ("spc", n_system)  # kept from the first one's prefill
    assert list(second.token_ids) == oracle.chat(second_msgs, 4)
