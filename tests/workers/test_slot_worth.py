"""Issue 22 §0: slots follow memory, and eviction weighs what keeping a conversation is worth.

A worker keeps as many conversations as its KV budget holds (`num_slots` 0), and when a slot or
memory is needed the idle conversation least worth keeping goes (`keep_worth`: its length, who
asked, how long it has been idle). The measured case: 17 short API requests pushed the user's
8,191- and 4,305-token conversations out of a 4-slot worker while the budget was far from full."""

from __future__ import annotations

import pytest
from test_scheduler import FakeRunner, Rig, StubTemplate, U

from desktop.errors import InvalidRequest
from desktop.model.params import SamplingParams
from desktop.protocol import Chat
from desktop.workers.config import AUTO_FLOOR_TOKENS, AUTO_MAX_SLOTS, DECODE_BATCH, WorkerConfig, slot_count
from desktop.workers.scheduler import Scheduler
from desktop.workers.sequence import Seq
from desktop.workers.slots import HALF_LIFE_S, ORIGIN_WEIGHT, Slot, SlotTable, keep_worth

BPT = 64  # bytes of KV per token in these tests: 1 MiB holds 16,384 tokens
HOUR = 3600.0


# ------------------------------------------------------------------ the rule, alone


def test_worth_grows_with_length_and_with_the_app_as_the_asker():
    assert keep_worth(8191, "app", 60) > keep_worth(4305, "app", 60) > keep_worth(100, "app", 60)
    assert keep_worth(500, "app", 60) > keep_worth(500, "api", 60)
    assert keep_worth(500, "app", 0) / keep_worth(500, "api", 0) == ORIGIN_WEIGHT["app"] / ORIGIN_WEIGHT["api"]
    assert keep_worth(500, "someone", 0) == keep_worth(500, "api", 0)  # an unknown asker weighs as the API


def test_worth_halves_every_half_life_idle():
    fresh = keep_worth(1000, "app", 0)
    assert keep_worth(1000, "app", HALF_LIFE_S) == pytest.approx(fresh / 2)
    assert keep_worth(1000, "app", 3 * HALF_LIFE_S) == pytest.approx(fresh / 8)
    assert keep_worth(1000, "app", -5) == fresh  # a clock that stepped back is "just used"


def test_a_short_api_exchange_goes_before_the_users_long_chat_but_not_one_left_for_hours():
    assert keep_worth(120, "api", 0) < keep_worth(8191, "app", HOUR)
    assert keep_worth(500, "app", 3 * HOUR) < keep_worth(500, "api", 0)


def table_of(*slots: tuple[int, str, float], now: float = 10 * HOUR, budget: int = 1 << 30) -> SlotTable:
    """A table whose slots hold (tokens, origin, last used) each, its clock at `now`."""
    table = SlotTable(len(slots), 1, budget, clock=lambda: now)
    for slot, (n, origin, used) in zip(table.slots, slots):
        slot.ids, slot.origin, slot.last_used = list(range(1, n + 1)), origin, used
    return table


def test_the_victim_is_the_least_worth_and_the_least_recently_used_among_equals():
    t = 10 * HOUR
    table = table_of((8191, "app", t - 60), (100, "api", t - 30), (4305, "app", t - 120))
    assert table.victim(table.slots).index == 1
    twins = table_of((300, "api", t - 50), (300, "api", t - 90), (300, "api", t - 10))
    assert twins.victim(twins.slots).index == 1  # the same worth but for age: the oldest
    same_time = table_of((300, "api", t), (300, "api", t))
    assert same_time.victim(same_time.slots).index == 0  # exact ties: the first slot, deterministic


def test_take_free_evicts_through_evict_and_on_evict():
    told: list[int] = []
    table = table_of((900, "app", 1.0), (50, "api", 2.0))
    table.on_evict = lambda slot: told.append(slot.index)
    slot = table.take_free()
    assert slot.index == 1 and told == [1] and not slot.ids and table.slots[0].ids


# ------------------------------------------------------------------ how many slots


def test_the_slot_count_follows_the_budget():
    assert slot_count(1 << 30, 1 << 30) == 1  # not even one short conversation: one slot still
    assert slot_count(1 << 30, 1 << 30, least=DECODE_BATCH) == DECODE_BATCH
    assert slot_count(64 * AUTO_FLOOR_TOKENS * BPT, BPT) == 64
    assert slot_count(1 << 40, 1) == AUTO_MAX_SLOTS
    assert slot_count(2 << 20, BPT) == 2 * slot_count(1 << 20, BPT) < AUTO_MAX_SLOTS  # within the cap: proportional


def test_automatic_is_the_default_and_the_decode_batch_stays_small():
    cfg = WorkerConfig()
    assert cfg.num_slots == 0 and cfg.max_running == DECODE_BATCH
    sized = cfg.sized(BPT)
    assert sized.num_slots == slot_count(cfg.kv_budget_bytes, BPT, DECODE_BATCH) and sized.max_running == DECODE_BATCH
    assert WorkerConfig(num_slots=3).sized(BPT).num_slots == 3  # set by hand: kept
    assert WorkerConfig(num_slots=2).max_running == 2
    small = WorkerConfig(kv_budget_bytes=1 << 20).sized(1 << 20)  # a budget of one token: still a decode batch
    assert small.num_slots == small.max_running == DECODE_BATCH
    with pytest.raises(InvalidRequest):
        WorkerConfig(num_slots=-1)


# ------------------------------------------------------------------ the measured case, without a model


class BudgetRig(Rig):
    """test_scheduler's Rig with a KV cost per token, so that a budget of a few MiB bites."""

    def __init__(self, bytes_per_token: int = BPT, **config) -> None:
        super().__init__(window=20_000, **config)
        self.s = Scheduler(self.cfg, StubTemplate(), self.window, bytes_per_token, self.clock)
        self.runner = FakeRunner(self.s.cfg.num_slots)

    def ask(self, rid: str, text: str, origin: str, max_tokens: int = 4) -> Seq:
        msgs = (U(text),)
        params = SamplingParams(max_tokens=max_tokens)
        return self.add(Seq(rid, Chat(rid, msgs, params, origin=origin), self.clock(), self.window, params, msgs))

    def holding(self, text: str) -> int | None:
        """The slot holding the conversation that starts with this user message, if any."""
        for slot in self.s.table.slots:
            if slot.msgs and slot.msgs[0].content == text:
                return slot.index
        return None


LONG_A, LONG_B = "a" * 8180, "b" * 4295  # with the template's markers and a reply: ≈ 8,191 and 4,305 tokens


def long_chats_then_api(rig: BudgetRig, api_len: int = 100, one_by_one: bool = False) -> list[Seq]:
    """The two long app chats, then 17 short API requests (all at once, or one after another)."""
    rig.run(rig.ask("long-a", LONG_A, "app"))
    rig.run(rig.ask("long-b", LONG_B, "app"))
    api = []
    for i in range(17):
        api.append(rig.ask(f"api-{i}", f"{i:02d} " + "q" * api_len, "api"))
        if one_by_one:
            rig.run(api[-1])
    rig.run(*api)
    return api


def test_a_budget_big_enough_keeps_the_long_chats_and_every_api_one():
    rig = BudgetRig(kv_budget_bytes=2 << 20)  # 32,768 tokens: all of it fits
    assert rig.s.cfg.num_slots == slot_count(2 << 20, BPT, DECODE_BATCH) >= 19
    long_chats_then_api(rig)
    assert rig.holding(LONG_A) is not None and rig.holding(LONG_B) is not None
    assert sum(1 for s in rig.s.table.slots if s.ids) == 19  # nothing was evicted
    again = rig.ask("long-a-2", LONG_A, "app")
    rig.run(again)
    assert again.placement.kind == "hit" and again.cached >= len(LONG_A)


def test_a_small_budget_sends_the_api_conversations_first():
    rig = BudgetRig(kv_budget_bytes=1 << 20)  # 16,384 tokens: the long chats and a few short ones
    api = long_chats_then_api(rig, api_len=400)
    assert rig.holding(LONG_A) is not None and rig.holding(LONG_B) is not None
    kept = [s for s in api if rig.holding(s.msgs[0].content) is not None]
    assert 0 < len(kept) < len(api)  # the budget bit: some of the API ones went, only they
    assert kept == api[-len(kept):]  # and among them the least recently used first
    assert all(rig.runner.kv[s.index] == s.ids for s in rig.s.table.slots)


def test_four_slots_no_longer_push_the_long_chats_out():
    """The issue's worker had 4 slots: by least recently used alone, 17 API requests evicted both
    long chats. By worth, the API requests take turns in the two other slots. (Four running at
    once would still need all four slots: that is what the automatic count is for.)"""
    rig = BudgetRig(num_slots=4, kv_budget_bytes=4 << 20)
    api = long_chats_then_api(rig, one_by_one=True)
    assert rig.holding(LONG_A) is not None and rig.holding(LONG_B) is not None
    assert [rig.holding(s.msgs[0].content) is not None for s in api].count(True) == 2


def test_an_app_chat_idle_for_hours_goes_before_a_fresh_api_one_of_its_size():
    rig = BudgetRig(num_slots=2, kv_budget_bytes=4 << 20)
    rig.run(rig.ask("old-app", "o" * 500, "app"))
    rig.now += 3 * HOUR
    rig.run(rig.ask("fresh-api", "f" * 500, "api"))
    rig.run(rig.ask("next", "n" * 500, "api"))
    assert rig.holding("o" * 500) is None and rig.holding("f" * 500) is not None
    assert rig.holding("n" * 500) is not None


def test_the_slot_remembers_who_asked_last():
    rig = BudgetRig(num_slots=2, kv_budget_bytes=4 << 20)
    rig.run(rig.ask("one", "x" * 50, "api"))
    slot = rig.s.table.slots[rig.holding("x" * 50)]
    assert slot.origin == "api"
    rig.run(rig.ask("two", "x" * 50, "app"))  # the window asks for the same conversation
    assert slot.origin == "app" and isinstance(slot, Slot)
