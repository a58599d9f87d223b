"""Eviction by worth (issue 22 §0) stays exact: random conversations from the window and the API,
short and long, one at a time and several at once, on a worker whose slot count comes from a
small KV budget (or is 2): every reply equals the uncached one (greedy, fp32) and the slots'
bookkeeping holds after every step."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from worker_helpers import check_integrity, run_all

from desktop.model.messages import Message
from desktop.model.params import SamplingParams
from desktop.protocol import Chat, Done, ErrorEvent
from desktop.workers.config import WorkerConfig
from desktop.workers.local import LocalClient

BUDGET = 1 << 20  # the smallest budget: 4,096 positions of the tiny model (256 bytes each)
LONG = "The quick brown fox jumps over the lazy dog, and then it runs far away. " * 6
MAX = 4
TURN = st.tuples(st.integers(0, 4), st.sampled_from(["app", "api"]), st.booleans())  # conversation, origin, long
OPS = st.lists(st.one_of(st.tuples(st.just("one"), TURN), st.tuples(st.just("many"), st.lists(TURN, min_size=2, max_size=3))),
               min_size=3, max_size=10)


@pytest.mark.parametrize("runner", ["hf", "static"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(num_slots=st.sampled_from([0, 2]), ops=OPS)
def test_eviction_by_worth_keeps_cached_equal_to_uncached(tiny_lm, oracle, num_slots, ops, runner):
    cfg = WorkerConfig(num_slots=num_slots, kv_budget_bytes=BUDGET, cache_min_tokens=8, prefill_chunk=64,
                       prefill_budget=64, runner=runner)
    client = LocalClient(tiny_lm, cfg, on_step=check_integrity)
    table = client.worker.scheduler.table
    assert len(table.slots) == (num_slots or client.worker.scheduler.cfg.num_slots) >= 2
    convs: list[list[Message]] = [[] for _ in range(5)]
    for n, (kind, turns) in enumerate(ops):
        turns = [turns] if kind == "one" else list({t[0]: t for t in turns}.values())  # a conversation once per batch
        cmds, expected = [], {}
        for k, (i, origin, long) in enumerate(turns):
            conv = convs[i]
            conv.append(Message("user", (LONG if long else "") + f"turn {n}.{k}"))
            if len(tiny_lm.template.prompt_ids(conv)) + MAX > tiny_lm.context_length:
                conv[:] = [Message("user", f"start again {n}")]
            rid = f"r{n}.{k}"
            cmds.append(Chat(rid, tuple(conv), SamplingParams(max_tokens=MAX), origin=origin))
            expected[rid] = (i, oracle.chat(conv, MAX))
        for rid, events in run_all(client, cmds).items():
            i, want = expected[rid]
            end = events[-1]
            if isinstance(end, ErrorEvent):  # the budget is taken by the others running: retryable, nothing kept
                assert end.retryable and "KV memory budget" in end.message, end
                convs[i].pop()
                continue
            assert isinstance(end, Done) and list(end.token_ids) == want, (rid, end)
            convs[i].append(Message("assistant", end.text))
    assert table.used_bytes() <= table.budget_bytes
