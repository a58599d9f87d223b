"""Issue 19, item 2: the KV budget bounds what the static runner's pool really allocates.

The pool's tensors are counted (bytes of every K and V tensor) after every worker step, over
random sequences of long and short chats on many slots: never over the configured budget. What
does not fit is evicted, or refused with a clear, retryable error; cached output still equals
uncached output."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from worker_helpers import chat, check_integrity, run_all

from desktop.model.kv_shape import PaddedRows, PerToken
from desktop.model.messages import Message
from desktop.model.params import SamplingParams
from desktop.protocol import Chat, Done, ErrorEvent
from desktop.workers.config import WorkerConfig
from desktop.workers.local import LocalClient
from desktop.workers.slots import SlotTable

pytestmark = pytest.mark.hardening

BUDGET = 1 << 20  # 1 MiB: 4,096 row-positions of the tiny model (256 bytes a position)
LONG = "The quick brown fox jumps over the lazy dog, and then it runs far away. " * 14
MAX = 4
RUNNERS = pytest.mark.parametrize("runner", ["static", "static-bucketed"])


def pool_bytes(runner) -> int:
    """What the pool's tensors hold, counted from the tensors themselves."""
    return sum(t.numel() * t.element_size() for t in runner.pool.k + runner.pool.v)


def budget_client(lm, runner: str, seen: list[int], **config) -> LocalClient:
    def check(worker) -> None:
        check_integrity(worker)
        seen.append(pool_bytes(worker.runner))
        assert seen[-1] <= BUDGET, f"the KV pool holds {seen[-1]} bytes, over the budget of {BUDGET}"

    cfg = WorkerConfig(kv_budget_bytes=BUDGET, runner=runner, prefill_chunk=256, prefill_budget=256, **config)
    return LocalClient(lm, cfg, on_step=check)


@RUNNERS
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.tuples(st.integers(0, 5), st.booleans()), min_size=4, max_size=12))
def test_pool_stays_within_budget_over_random_chats(tiny_lm, oracle, ops, runner):
    seen: list[int] = []
    client = budget_client(tiny_lm, runner, seen, num_slots=16, cache_min_tokens=8)
    convs: list[list[Message]] = [[] for _ in range(6)]
    for n, (i, long) in enumerate(ops):
        conv = convs[i]
        conv.append(Message("user", LONG if long else f"short turn {n}"))
        if len(tiny_lm.template.prompt_ids(conv)) + MAX > tiny_lm.context_length:
            conv[:] = [Message("user", "start again")]  # past the tiny model's window: a new conversation
        done = chat(client, f"r{n}", conv, MAX)
        assert list(done.token_ids) == oracle.chat(conv, MAX), (n, done.stats)
        conv.append(Message("assistant", done.text))
    assert seen and max(seen) <= BUDGET


@RUNNERS
def test_long_chats_on_many_slots_evict_to_fit(tiny_lm, oracle, runner):
    """Sixteen slots, conversations of ~700 tokens one after another: the pool keeps only as
    many rows as fit (on the old pool: 16 rows × 1,024 columns = 4 MiB)."""
    seen: list[int] = []
    client = budget_client(tiny_lm, runner, seen, num_slots=16)
    for n in range(6):
        msgs = [Message("user", f"conversation {n}: {LONG}")]
        done = chat(client, f"c{n}", msgs, MAX)
        assert list(done.token_ids) == oracle.chat(msgs, MAX)
        assert done.stats.input_tokens > 512  # each needs a row of 1,024 columns
    assert max(seen) <= BUDGET
    held = [s for s in client.worker.scheduler.table.slots if s.ids]
    assert 1 <= len(held) <= 4, "four rows of 1,024 columns fill 1 MiB: the others were evicted"


@RUNNERS
def test_what_does_not_fit_is_refused_clearly(tiny_lm, oracle, runner):
    """Long chats at once, each reserving a 2,048-column row (512 KiB): two run, the others are
    refused with a clear, retryable error instead of growing the pool past the budget."""
    seen: list[int] = []
    client = budget_client(tiny_lm, runner, seen, num_slots=16)
    cmds = [Chat(f"p{i}", (Message("user", f"{i} {LONG}"),), SamplingParams(max_tokens=600)) for i in range(4)]
    results = run_all(client, cmds)
    errors = [ev[-1] for ev in results.values() if isinstance(ev[-1], ErrorEvent)]
    done = [ev[-1] for ev in results.values() if isinstance(ev[-1], Done)]
    assert len(done) >= 1 and errors, [ev[-1] for ev in results.values()]
    for err in errors:
        assert err.retryable and "KV memory budget" in err.message and "Traceback" not in err.message
    assert max(seen) <= BUDGET


def test_slot_table_budgets_padded_rows():
    """Torch-free: under the pool's layout every held slot costs a row as long as the longest."""
    rows = PaddedRows(bytes_per_token=256, max_len=2048)
    assert rows([10, 0, 5]) == 2 * 256 * 256 and rows([600, 10]) == 2 * 1024 * 256 and rows([]) == 0
    assert rows([2048]) == 2049 * 256  # a whole context: context + the scratch column
    assert PerToken(256)([600, 10]) == 610 * 256
    table = SlotTable(16, 256, BUDGET, clock=iter(range(10**6)).__next__, footprint=rows)
    for i, slot in enumerate(table.slots[:8]):  # eight short idle conversations: 8 × 256 columns
        slot.ids, slot.last_used = [1] * 100, i
    assert table.used_bytes() == 8 * 256 * 256
    table.reserve(table.slots[8], 900)  # one long one: every row becomes 1,024 columns
    assert table.used_bytes() <= BUDGET
    assert sum(1 for s in table.slots if s.ids) == 3, "the least recently used short ones were evicted"
    assert [s.index for s in table.slots if s.ids] == [5, 6, 7]


def test_a_reservation_that_cannot_fit_evicts_nothing():
    """Running conversations hold most of the budget: a new long one is refused, and the idle
    conversations keep their KV (evicting them could not have made room)."""
    from desktop.errors import BusyError
    from desktop.workers.slots import SlotTable

    table = SlotTable(16, 256, BUDGET, clock=iter(range(10**6)).__next__, footprint=PerToken(256))
    running = table.slots[0]
    running.ids, running.request_id = [1] * 3000, "r0"  # 3,000 of the 4,096 positions, in use
    for i, slot in enumerate(table.slots[1:5], 1):
        slot.ids, slot.last_used = [1] * 100, i  # four idle conversations
    with pytest.raises(BusyError):
        table.reserve(table.slots[5], 2000)  # 3,000 + 2,000 > 4,096 whatever is evicted
    assert [len(s.ids) for s in table.slots[1:5]] == [100] * 4 and table.slots[5].reserved == 0
