"""The scheduler's order for warms (prefill-only chats), without a model: a warm waits while a
real request runs, gets no prefill chunk beside one, steps aside when one waits, never takes a
slot it would have to evict, and prefills in chunks of at most WARM_CHUNK ids."""

from __future__ import annotations

from test_scheduler import A, Rig, S, U

from desktop.workers.scheduler import WARM_CHUNK
from desktop.workers.sequence import Phase


def test_a_warm_waits_for_real_work_and_steps_aside_for_it():
    rig = Rig(num_slots=3, prefill_chunk=512, prefill_budget=512)
    real = rig.chat("real", [U("count")], max_tokens=6, reply="abcdef")
    rig.tick()
    warm = rig.chat("warm", [S, U("x" * 200)], max_tokens=0)
    while "real" not in rig.ended:  # decoding every tick; the warm is not admitted meanwhile
        assert rig.s.next_waiting() is None and warm.phase is Phase.WAITING
        rig.tick()
    rig.tick()
    assert warm.phase is Phase.PREFILL and warm.num_kv - warm.cached == WARM_CHUNK  # small chunks
    rig.chat("next", [U("hello")], max_tokens=2)
    assert rig.s.yielding() == [warm]  # a real request waits: the warm ends first (the loop does it)
    rig.finish(warm, "cancelled")
    assert rig.s.table.slots[warm.slot.index].ids == warm.prompt[: warm.num_kv]  # its KV kept


def test_a_warm_gets_no_chunk_beside_a_real_request():
    rig = Rig(num_slots=2, prefill_chunk=8, prefill_budget=64)
    warm = rig.chat("warm", [U("y" * 40)], max_tokens=0)
    rig.tick()
    real = rig.chat("real", [U("z" * 40)], max_tokens=2)
    seq = rig.s.next_waiting()  # (the loop ends the warm first; here both stay active)
    rig.s.admit(seq)
    rig.sync()
    plan = rig.s.schedule_prefill()
    assert [s.request_id for s, _ in plan.chunks] == ["real"] and warm.phase is Phase.PREFILL


def test_a_warm_takes_only_its_own_slot_or_an_empty_one():
    rig = Rig(num_slots=1)
    rig.run(rig.chat("a", [U("first conversation")], reply="okay"))
    other = rig.chat("w1", [U("another one")], max_tokens=0)
    assert rig.s.next_waiting() is other and not rig.s.warm_fits(other)  # it would evict "a"
    same = rig.chat("w2", [U("first conversation"), A("okay"), U("and more")], max_tokens=0)
    assert rig.s.next_waiting() is same and rig.s.warm_fits(same)

