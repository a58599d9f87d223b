"""Worker behaviour on the tiny model: cache kinds, stop keeps KV, sessions, eviction, budget."""

from __future__ import annotations

from worker_helpers import chat, make_client

from desktop.protocol import AppendInput, Chat, ChunkEvent, CreateSession, Done, EndSession, Generate, PrefillDone, Stop
from desktop.model.messages import Message
from desktop.model.params import SamplingParams

SYSTEM = Message("system", "You are a helpful assistant. Answer briefly and clearly, in plain words.")


def test_second_turn_extends_the_first_and_matches_oracle(tiny_lm, oracle):
    client = make_client(tiny_lm, num_slots=2)
    msgs = [SYSTEM, Message("user", "Hello there, how are you today?")]
    first = chat(client, "a", msgs)
    assert list(first.token_ids) == oracle.chat(msgs, 8)
    msgs += [Message("assistant", first.text), Message("user", "What is the weather like?")]
    second = chat(client, "b", msgs)
    assert second.stats.kind == "extend"
    assert second.stats.cached_tokens > first.stats.input_tokens // 2
    assert list(second.token_ids) == oracle.chat(msgs, 8)


def test_chunks_stream_before_done_and_join_to_the_text(tiny_lm):
    client = make_client(tiny_lm)
    events = client.run(Chat("a", (Message("user", "Hi 🙂"),), SamplingParams(max_tokens=20)))
    assert isinstance(events[0], PrefillDone)
    chunks = [e.text_delta for e in events if isinstance(e, ChunkEvent)]
    assert len(chunks) > 1 and "".join(chunks) == events[-1].text
    assert len(chunks) <= events[-1].stats.generated_tokens


def test_regenerate_is_a_hit(tiny_lm, oracle):
    client = make_client(tiny_lm)
    msgs = [SYSTEM, Message("user", "Pack my box with five dozen liquor jugs.")]
    chat(client, "a", msgs)
    again = chat(client, "b", msgs)
    assert again.stats.kind == "hit"
    assert again.stats.input_tokens - again.stats.cached_tokens == 1
    assert list(again.token_ids) == oracle.chat(msgs, 8)


def test_stop_ends_generation_and_keeps_kv(tiny_lm):
    client = make_client(tiny_lm)
    msgs = [SYSTEM, Message("user", "Tell me a long story.")]
    stream = client.stream(Chat("a", tuple(msgs), SamplingParams(max_tokens=200)))
    seen = 0
    for event in stream:
        if isinstance(event, ChunkEvent):
            seen += 1
            if seen == 3:
                client.submit(Stop("a"))
        if isinstance(event, Done):
            done = event
    assert done.stats.finish_reason == "stopped"
    assert done.stats.generated_tokens <= 6  # within one decode step of the stop
    nxt = chat(client, "b", msgs + [Message("assistant", done.text), Message("user", "Go on.")])
    assert nxt.stats.kind == "extend" and nxt.stats.cached_tokens >= done.stats.input_tokens


def test_spc_built_once_and_rebuilt_on_change(tiny_lm):
    client = make_client(tiny_lm, num_slots=3)
    slots = set()
    for i in range(3):
        done = chat(client, f"a{i}", [SYSTEM, Message("user", f"Question number {i}?")])
        # the first seeds from the system prompt cache; later ones copy that prefix from a slot
        assert done.stats.kind == ("spc" if i == 0 else "prefix")
        assert done.stats.cached_tokens >= len(tiny_lm.template.encode([SYSTEM]).ids)
        slots.add(done.stats.slot)
    assert len(slots) == 3  # no conversation was cropped to make room for another
    assert client.worker.scheduler.spc.builds == 1
    chat(client, "b", [Message("system", "Be terse."), Message("user", "Hi")])
    assert client.worker.scheduler.spc.builds == 2


def test_lru_eviction_picks_the_oldest(tiny_lm):
    client = make_client(tiny_lm, num_slots=2, cache_mode="imc")
    a = [Message("user", "Conversation A")]
    b = [Message("user", "Conversation B")]
    ra, rb = chat(client, "a", a), chat(client, "b", b)
    assert ra.stats.slot != rb.stats.slot
    c = chat(client, "c", [Message("user", "Conversation C")])
    assert c.stats.slot == ra.stats.slot  # A was used least recently
    again_b = chat(client, "b2", b + [Message("assistant", rb.text), Message("user", "more")])
    assert again_b.stats.kind == "extend"
    again_a = chat(client, "a2", a + [Message("assistant", ra.text), Message("user", "more")])
    assert again_a.stats.kind == "miss" and again_a.stats.miss_reason == "evicted"


def test_kv_budget_evicts_idle_slots(tiny_lm):
    per_token = tiny_lm.kv_bytes_per_token
    client = make_client(tiny_lm, num_slots=4, cache_mode="imc", kv_budget_bytes=1 << 20)
    budget_tokens = client.worker.scheduler.table.budget_bytes // per_token
    for i in range(6):  # three fit, the rest must evict the least recently used
        done = chat(client, f"r{i}", [Message("user", "word " * (budget_tokens // 7))], max_tokens=4)
        assert done.stats.input_tokens > budget_tokens // 4
        assert client.worker.scheduler.table.used_bytes() <= client.worker.scheduler.table.budget_bytes


def test_session_is_append_only_and_matches_oracle(tiny_lm, oracle):
    client = make_client(tiny_lm, num_slots=2)
    t = tiny_lm.template
    assert isinstance(client.run(CreateSession("c", "s1", SYSTEM.content))[-1], Done)
    history = [SYSTEM]
    ids = t.encode(history).ids
    for turn in range(3):
        user = Message("user", f"Turn {turn}: how are you?")
        events = client.run(AppendInput(f"ap{turn}", "s1", (user,)))
        assert isinstance(events[-1], Done) and isinstance(events[0], PrefillDone)
        ids += t.encode_delta(history, [user]).ids
        history.append(user)
        done = client.run(Generate(f"g{turn}", "s1", SamplingParams(max_tokens=6)))[-1]
        ids += t.gen_prompt_ids
        expected = oracle.ids(ids, 6)
        assert list(done.token_ids) == expected
        assert done.stats.cached_tokens == len(ids) - len(t.gen_prompt_ids)  # only the reply prompt is new
        ids += expected + t.close_after_reply(expected)
        history.append(Message("assistant", done.text))
    assert isinstance(client.run(EndSession("e", "s1"))[-1], Done)
    assert all(s.session_id is None and not s.ids for s in client.worker.scheduler.table.slots if s.state != "idle")
