"""Cache-aware routing through the gateway over fake hosts: hits, free slots before eviction,
LRU eviction, and conversations that keep hitting their worker. The gateway picks the worker; the
worker picks the slot, and the gateway's mirror learns it only from what the worker reports."""

from __future__ import annotations

from desktop.model.messages import history_hash
from desktop.protocol import Done, PrefillDone
from fake_host import FakeHost
from gw_helpers import bot, collect, gateway, run, settle, terminal, turn, user


def test_second_turn_goes_to_the_worker_holding_the_first() -> None:
    async def main() -> None:
        hosts = (FakeHost("w1"), FakeHost("w2"))
        async with gateway(*hosts) as gw:
            first = [user("hello")]
            w_first, _ = await turn(gw, hosts, first, "Hi!")
            for _ in range(3):  # whatever else happens in between, e.g. another conversation
                await turn(gw, hosts, [user("unrelated")])
            w_second, events = await turn(gw, hosts, first + [bot("Hi!"), user("how are you?")])
            assert w_second == w_first
            assert next(e for e in events if isinstance(e, PrefillDone)).kind == "extend"
            assert gw.stats().routing["hit"] == 1
            assert gw.stats().cache["extend"] == 1
    run(main())


def test_cacheless_worker_is_preferred_over_evicting_a_cache() -> None:
    async def main() -> None:
        hosts = (FakeHost("w1", num_slots=1), FakeHost("w2", num_slots=1))
        async with gateway(*hosts) as gw:
            a = [user("conversation A")]
            w_a, _ = await turn(gw, hosts, a, "A!")
            w_b, _ = await turn(gw, hosts, [user("conversation B")], "B!")
            assert w_b != w_a
            assert gw.stats().routing == {"hit": 0, "free": 2, "evict": 0, "session": 0}
            w_a2, events = await turn(gw, hosts, a + [bot("A!"), user("more A")])  # A's cache survived
            assert w_a2 == w_a and terminal(events).stats.kind == "extend"
    run(main())


def test_an_empty_slot_on_the_same_worker_beats_eviction() -> None:
    async def main() -> None:
        host = FakeHost("w1", num_slots=2)
        async with gateway(host) as gw:
            a = [user("A")]
            await turn(gw, (host,), a, "a")
            await turn(gw, (host,), [user("B")], "b")
            assert host.slot_of(tuple(a + [bot("a")])) is not None
            assert gw.stats().routing["free"] == 2
    run(main())


def test_lru_eviction_picks_the_oldest_slot_across_workers() -> None:
    async def main() -> None:
        hosts = (FakeHost("w1", num_slots=1), FakeHost("w2", num_slots=1))
        async with gateway(*hosts) as gw:
            a, b = [user("A")], [user("B")]
            w_a, _ = await turn(gw, hosts, a, "a")
            w_b, _ = await turn(gw, hosts, b, "b")
            await turn(gw, hosts, a + [bot("a"), user("A again")], "a2")  # A is now the most recent
            w_c, _ = await turn(gw, hosts, [user("C")], "c")
            assert w_c == w_b  # B's slot was the least recently used
            assert gw.stats().routing["evict"] == 1
            w_a3, events = await turn(gw, hosts, a + [bot("a"), user("A again"), bot("a2"), user("A3")])
            assert w_a3 == w_a and terminal(events).stats.kind == "extend"
    run(main())


def test_lru_eviction_within_one_worker() -> None:
    async def main() -> None:
        host = FakeHost("w1", num_slots=2)
        async with gateway(host) as gw:
            convs = {name: [user(name)] for name in "ABC"}
            for name in "AB":
                await turn(gw, (host,), convs[name], name.lower())
            await turn(gw, (host,), convs["A"] + [bot("a"), user("A2")], "a2")  # touch A
            await turn(gw, (host,), convs["C"], "c")  # evicts B, not A
            assert host.slot_of(tuple(convs["B"] + [bot("b")])) is None
            assert host.slot_of(tuple(convs["A"] + [bot("a"), user("A2"), bot("a2")])) is not None
    run(main())


def test_two_conversations_alternating_over_two_workers_keep_hitting() -> None:
    async def main() -> None:
        hosts = (FakeHost("w1", num_slots=1), FakeHost("w2", num_slots=1))
        async with gateway(*hosts) as gw:
            convs = {"A": [user("A0")], "B": [user("B0")]}
            home: dict[str, str] = {}
            for i in range(4):
                for name, msgs in convs.items():
                    worker, events = await turn(gw, hosts, msgs, f"{name}{i}")
                    assert home.setdefault(name, worker) == worker
                    assert terminal(events).stats.kind == ("miss" if i == 0 else "extend")
                    msgs += [bot(f"{name}{i}"), user(f"{name}{i + 1}")]
            assert home["A"] != home["B"]
            assert gw.stats().routing == {"hit": 6, "free": 2, "evict": 0, "session": 0}
    run(main())


def test_concurrent_conversations_on_two_workers_keep_hitting() -> None:
    async def main() -> None:
        hosts = (FakeHost("w1", num_slots=1), FakeHost("w2", num_slots=1))
        async with gateway(*hosts) as gw:
            convs = [[user("A0")], [user("B0")]]
            for i in range(3):
                streams = [gw.chat(m) for m in convs]  # both in flight at once
                await settle()
                for s in streams:
                    next(h for h in hosts if s.request_id in h.active).finish(s.request_id, f"r{i}")
                for s, m in zip(streams, convs):
                    assert terminal(await collect(s)).stats.kind == ("miss" if i == 0 else "extend")
                    m += [bot(f"r{i}"), user(f"next{i}")]
            assert all(not h.violations for h in hosts)
    run(main())


def test_two_new_conversations_at_once_do_not_count_on_one_free_slot() -> None:
    """Two new conversations at once: the second must not count on the slot the first will take
    (w1 still has capacity for it, but no slot)."""
    async def main() -> None:
        hosts = (FakeHost("w1", capacity=2, num_slots=1), FakeHost("w2", capacity=1, num_slots=1))
        async with gateway(*hosts) as gw:
            s1, s2 = gw.chat([user("one")]), gw.chat([user("two")])
            await settle()
            assert s1.request_id in hosts[0].active and s2.request_id in hosts[1].active
            assert not hosts[0].violations
            for s in (s1, s2):
                next(h for h in hosts if s.request_id in h.active).finish(s.request_id)
                assert isinstance(terminal(await collect(s)), Done)
    run(main())


def test_routing_without_slot_snapshots_uses_the_reply_it_saw() -> None:
    """A host that sends no Done.slots: the mirror remembers the conversation plus the reply."""
    async def main() -> None:
        hosts = (FakeHost("w1", num_slots=1, send_slots=False), FakeHost("w2", num_slots=1, send_slots=False))
        async with gateway(*hosts) as gw:
            a = [user("A")]
            w_a, _ = await turn(gw, hosts, a, "a")
            await turn(gw, hosts, [user("B")], "b")
            w_a2, _ = await turn(gw, hosts, a + [bot("a"), user("A2")])
            assert w_a2 == w_a and gw.stats().routing["hit"] == 1
    run(main())


def slot_view(gw) -> list[tuple[bool, int, int]]:
    """The admin panel's view of the first worker's slots: (in use, hashes, tokens)."""
    return [(s.in_use, s.hashes, s.tokens) for s in gw.stats().workers[0].slots]


def test_dispatch_leaves_the_mirror_until_the_worker_reports() -> None:
    async def main() -> None:
        host = FakeHost("w1", capacity=2, num_slots=3)
        async with gateway(host) as gw:
            a = [user("A")]
            await turn(gw, (host,), a, "a")
            before = slot_view(gw)
            assert before == [(False, 2, 20), (False, 0, 0), (False, 0, 0)]
            s2, s3 = gw.chat(a + [bot("a"), user("A2")]), gw.chat([user("B")])
            await settle()
            assert slot_view(gw) == before  # both run, in slots only the worker knows yet
            assert gw.stats().workers[0].in_flight == 2
            host.finish(s3.request_id, "b")  # its snapshot shows A2 running in slot 0, B in its slot
            await collect(s3)
            b_slot = host.slot_of((user("B"), bot("b")))
            assert [v[0] for v in slot_view(gw)] == [True, False, False]
            assert slot_view(gw)[b_slot] == (False, 2, 20)
            host.finish(s2.request_id, "a2")
            assert terminal(await collect(s2)).stats.kind == "extend"
            assert [v[0] for v in slot_view(gw)] == [False, False, False] and slot_view(gw)[0][1] == 4
    run(main())


def test_stats_show_what_runs_in_a_slot_from_its_prefill_until_its_end() -> None:
    """The mirror changes only on a Done; stats()' `running` names the request a slot runs now,
    from the slot its PrefillDone named (the admin panel shows it busy), and is gone at its end."""
    async def main() -> None:
        host = FakeHost("w1", capacity=2, num_slots=3)
        async with gateway(host) as gw:
            a = [user("A")]
            await turn(gw, (host,), a, "a")
            history = a + [bot("a")]
            s2 = gw.chat(history + [user("A2")])
            await settle()
            slot = host.active[s2.request_id].slot
            slots = gw.stats().workers[0].slots
            assert [s.running is not None for s in slots] == [i == slot for i in range(3)]
            run_ = slots[slot].running
            assert run_.request_id == s2.request_id and run_.messages == 3 and run_.tokens == 10
            assert run_.history == history_hash(history + [user("A2")])[:4].hex()
            assert slot_view(gw) == [(False, 2, 20), (False, 0, 0), (False, 0, 0)]  # the mirror waits for the Done
            host.finish(s2.request_id, "a2")
            await collect(s2)
            assert all(s.running is None for s in gw.stats().workers[0].slots)
    run(main())


def test_the_mirror_shows_the_slot_the_worker_chose() -> None:
    async def main() -> None:
        host = FakeHost("w1", capacity=1, num_slots=2)
        async with gateway(host) as gw:
            await turn(gw, (host,), [user("A")], "a")  # slot 0 holds A; slot 1 is empty
            host.slots.reverse()  # the fake now holds A in slot 1 and finds its empty slot at 0
            for i, slot in enumerate(host.slots):
                slot.index = i
            stream = gw.chat([user("B")])
            await settle()
            assert host.active[stream.request_id].slot == 0
            host.finish(stream.request_id, "b")
            await collect(stream)
            assert slot_view(gw) == [(False, 2, 20), (False, 2, 20)]
            w, events = await turn(gw, (host,), [user("A"), bot("a"), user("A2")])
            assert terminal(events).stats.kind == "extend" and gw.stats().routing["hit"] == 1
    run(main())


def test_the_done_names_the_worker_that_served_it() -> None:
    async def main() -> None:
        hosts = (FakeHost("remote0", num_slots=1), FakeHost("cpu0", num_slots=1))
        async with gateway(*hosts) as gw:
            served = {}
            for text in ("A", "B"):  # one each: the second goes to the other worker's free slot
                worker, events = await turn(gw, hosts, [user(text)], text.lower())
                served[worker] = terminal(events).stats.worker
            assert served == {"remote0": "remote0", "cpu0": "cpu0"}
    run(main())
