"""Issue 19, item 8: a conversation of many short messages is prefilled in forwards of a token
budget (prefill_chunk), across message boundaries, never one forward per message; the per-message
hash chain and bounds are still kept, and cached output equals uncached output.

The runner's forwards are counted (Runner.prefill calls) for a 300-message conversation on the
tiny model (given a 4,096-token window so that 300 messages fit)."""

from __future__ import annotations

import math

import pytest
from worker_helpers import Oracle, chat, check_integrity

from desktop.model.loader import LoadedModel, assemble
from desktop.model.messages import Message, prefix_hashes
from desktop.model.params import SamplingParams
from desktop.model.tiny import tiny_model, tiny_tokenizer
from desktop.protocol import AppendInput, CreateSession, Done, Generate
from desktop.workers.config import WorkerConfig
from desktop.workers.local import LocalClient

pytestmark = pytest.mark.hardening

CHUNK = 256
MAX = 4


@pytest.fixture(scope="module")
def wide_lm() -> LoadedModel:
    model = tiny_model()
    model.config.max_position_embeddings = 4096  # default rope: positions need no table of their own
    return assemble(model, tiny_tokenizer(), "omnidesk-tiny-4k", "cpu", "float32")


def conversation(n: int) -> list[Message]:
    msgs = [Message("system", "Be brief.")]
    for i in range(n):
        msgs.append(Message("user" if i % 2 == 0 else "assistant", f"m{i % 10}"))
    return msgs


def counting(client: LocalClient) -> list[int]:
    """The sizes of the runner's prefill forwards from now on."""
    runner, sizes = client.worker.runner, []
    forward = runner.prefill

    def counted(slot, ids, *args, **kwargs):
        sizes.append(len(ids))
        return forward(slot, ids, *args, **kwargs)

    runner.prefill = counted
    return sizes


@pytest.mark.parametrize("runner", ["hf", "static"])
def test_many_short_messages_prefill_in_token_chunks(wide_lm, runner):
    client = LocalClient(wide_lm, WorkerConfig(num_slots=2, prefill_chunk=CHUNK, prefill_budget=CHUNK, runner=runner),
                         on_step=check_integrity)
    sizes = counting(client)
    msgs = conversation(301)  # 300 short messages after the system prompt, ending with the user's
    done = chat(client, "r1", msgs, MAX)
    tokens = done.stats.input_tokens
    assert tokens > 1800 and sum(sizes) == tokens, (tokens, sum(sizes))
    # the system prompt's own forward (its cache is built once), then token chunks: not ~300 forwards
    assert len(sizes) <= math.ceil(tokens / CHUNK) + 1, sizes
    assert list(done.token_ids) == Oracle(wide_lm).chat(msgs, MAX)
    # the per-message bookkeeping is whole: a hash and a bound for every message (and the reply)
    slot = client.worker.scheduler.table.slots[done.stats.slot]
    assert len(slot.bounds) == len(msgs) + 1 and slot.hashes == prefix_hashes(slot.msgs)
    # the next turn reuses all of it and prefills only what is new, in one forward
    sizes.clear()
    follow = msgs + [Message("assistant", done.text), Message("user", "and?")]
    again = chat(client, "r2", follow, MAX)
    assert again.stats.kind in ("hit", "extend") and len(sizes) == 1
    assert list(again.token_ids) == Oracle(wide_lm).chat(follow, MAX)


def test_a_session_appending_many_messages_at_once_prefills_in_token_chunks(wide_lm):
    client = LocalClient(wide_lm, WorkerConfig(num_slots=2, prefill_chunk=CHUNK, prefill_budget=CHUNK))
    sizes = counting(client)
    events = client.run(CreateSession("s0", "s", "Be brief."))
    assert isinstance(events[-1], Done)
    history = conversation(301)[1:]
    events = client.run(AppendInput("s1", "s", tuple({"role": m.role, "content": m.content} for m in history)))
    assert isinstance(events[-1], Done)
    appended = sum(sizes[1:])
    assert appended > 1800 and len(sizes) - 1 <= math.ceil(appended / CHUNK), sizes
    events = client.run(Generate("s2", "s", SamplingParams(max_tokens=MAX)))
    assert list(events[-1].token_ids) == Oracle(wide_lm).chat(conversation(301), MAX)
