"""The product's core invariant: output with the KV cache equals output without it (greedy, fp32),
over random multi-turn conversations, in every cache mode, with integrity checked every step."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from worker_helpers import chat, make_client, run_all

from desktop.engine.protocol import AppendInput, Chat, CreateSession, Done, Generate, Stop
from desktop.model.messages import Message
from desktop.model.params import SamplingParams

TEXT = st.text(alphabet=list("abcdefghij klmnop.,?!é日本🙂\n"), min_size=1, max_size=30)
LONG = "The quick brown fox jumps over the lazy dog. " * 6  # longer than the prefill chunk (16)
MAX = 5

OPS = st.one_of(
    st.tuples(st.just("turn"), st.integers(0, 2), TEXT),
    st.tuples(st.just("regen"), st.integers(0, 2)),
    st.tuples(st.just("edit"), st.integers(0, 2), st.integers(0, 9), TEXT),
    st.tuples(st.just("system"), st.integers(0, 2), TEXT),
    st.tuples(st.just("long"), st.integers(0, 2)),
)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def request_for(op, conv: list[Message]) -> list[Message]:
    """The message list the op sends; `conv` is trimmed so that the reply can be appended."""
    kind = op[0]
    if kind == "regen" and conv and conv[-1].role == "assistant":
        conv.pop()
        return list(conv)
    if kind == "edit":
        users = [i for i, m in enumerate(conv) if m.role == "user"]
        if users:
            cut = users[op[2] % len(users)]
            del conv[cut:]
            conv.append(Message("user", op[3]))
            return list(conv)
    if kind == "system":
        if conv and conv[0].role == "system":
            conv[0] = Message("system", op[2])
        else:
            conv.insert(0, Message("system", op[2]))
    if not conv or conv[-1].role != "user":
        conv.append(Message("user", LONG if kind == "long" else (op[2] if len(op) > 2 and isinstance(op[2], str) else "Hi")))
    return list(conv)


@SETTINGS
@given(mode=st.sampled_from(["imc+spc", "imc", "spc", "off"]), num_slots=st.integers(1, 3), ops=st.lists(OPS, min_size=1, max_size=8))
def test_cached_equals_uncached(tiny_lm, oracle, mode, num_slots, ops):
    client = make_client(tiny_lm, num_slots=num_slots, cache_mode=mode, cache_min_tokens=8, prefill_chunk=16, prefill_budget=24)
    convs: list[list[Message]] = [[Message("system", "You are a helpful assistant.")], [], []]
    for n, op in enumerate(ops):
        conv = convs[op[1]]
        msgs = request_for(op, conv)
        done = chat(client, f"r{n}", msgs, MAX)
        assert list(done.token_ids) == oracle.chat(msgs, MAX), (mode, op, done.stats)
        conv.append(Message("assistant", done.text))


@SETTINGS
@given(lengths=st.lists(st.integers(1, 40), min_size=2, max_size=5), max_tokens=st.lists(st.integers(1, 12), min_size=5, max_size=5))
def test_batched_equals_unbatched(tiny_lm, oracle, lengths, max_tokens):
    """Sequences of different lengths join and leave the decode batch at different times."""
    client = make_client(tiny_lm, num_slots=5, prefill_chunk=8, prefill_budget=8)
    cmds, expected = [], {}
    for i, n in enumerate(lengths):
        msgs = [Message("user", ("abc déf " * n)[: n * 3])]
        cmds.append(Chat(f"b{i}", tuple(msgs), SamplingParams(max_tokens=max_tokens[i])))
        expected[f"b{i}"] = oracle.chat(msgs, max_tokens[i])
    results = run_all(client, cmds)
    for rid, events in results.items():
        assert isinstance(events[-1], Done) and list(events[-1].token_ids) == expected[rid]


SESSION_OPS = st.lists(
    st.one_of(st.tuples(st.just("append"), TEXT), st.tuples(st.just("generate"), st.integers(1, 8)), st.tuples(st.just("stop"), st.integers(1, 8))),
    min_size=1,
    max_size=8,
)


@SETTINGS
@given(system=st.one_of(st.none(), TEXT), ops=SESSION_OPS, mode=st.sampled_from(["imc+spc", "off"]))
def test_session_equals_uncached(tiny_lm, oracle, system, ops, mode):
    """A session's ids only grow; each reply equals an uncached run over exactly those ids."""
    t = tiny_lm.template
    client = make_client(tiny_lm, num_slots=2, cache_mode=mode, prefill_chunk=16)
    assert isinstance(client.run(CreateSession("c", "s", system))[-1], Done)
    history = [Message("system", system)] if system else []
    ids = t.encode(history).ids if history else []
    for n, op in enumerate(ops):
        if op[0] == "append":
            msg = Message("user", op[1])
            assert isinstance(client.run(AppendInput(f"a{n}", "s", (msg,)))[-1], Done)
            ids += t.encode_delta(history, [msg]).ids
            history.append(msg)
            continue
        limit = op[1] if op[0] == "generate" else 20
        stream = client.stream(Generate(f"g{n}", "s", SamplingParams(max_tokens=limit)))
        for event in stream:
            if op[0] == "stop" and event.__class__.__name__ == "ChunkEvent":
                client.submit(Stop(f"g{n}"))
                op = ("stopped", 0)
            done = event
        assert isinstance(done, Done)
        expected = oracle.ids(ids + t.gen_prompt_ids, limit)
        if done.stats.finish_reason == "stopped":
            assert list(done.token_ids) == expected[: len(done.token_ids)]
        else:
            assert list(done.token_ids) == expected
        out = list(done.token_ids)
        ids += t.gen_prompt_ids + out + t.close_after_reply(out)
        history.append(Message("assistant", done.text))
