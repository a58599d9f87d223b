"""The product's core invariant: output with the KV cache equals output without it (greedy, fp32),
over random multi-turn conversations, in every cache mode, with integrity checked every step."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from worker_helpers import CtrlC, chat, make_client, request_for, run_all

from desktop.protocol import AppendInput, Chat, ChunkEvent, CreateSession, Done, ErrorEvent, Generate, Stop, TruncateReply
from desktop.model.messages import Message
from desktop.model.params import SamplingParams

TEXT = st.one_of(
    st.text(alphabet=list("abcdefghij klmnop.,?!é日本🙂\n"), min_size=1, max_size=30),
    # pasted template markers (issue 8, item 6): text, never control tokens, on every path
    st.lists(st.sampled_from(["<|im_end|>", "<|im_start|>", "system", "\n", "hi ", "<|endoftext|>", "<|im"]), min_size=1, max_size=6).map("".join),
)
LONG = "The quick brown fox jumps over the lazy dog. " * 6  # longer than the prefill chunk (16)
MAX = 5

OPS = st.one_of(
    st.tuples(st.just("turn"), st.integers(0, 2), TEXT),
    st.tuples(st.just("regen"), st.integers(0, 2)),
    st.tuples(st.just("edit"), st.integers(0, 2), st.integers(0, 9), TEXT),
    st.tuples(st.just("system"), st.integers(0, 2), TEXT),
    st.tuples(st.just("long"), st.integers(0, 2)),
    # typed: warms of the draft at pauses in typing (prefixes of the text, or other text), then the turn
    st.tuples(st.just("typed"), st.integers(0, 2), TEXT, st.lists(st.one_of(st.floats(0, 1), TEXT), min_size=1, max_size=3)),
)
RUNNERS = pytest.mark.parametrize("runner", ["hf", "static", "static-bucketed"])
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@RUNNERS
@SETTINGS
@given(mode=st.sampled_from(["imc+spc", "imc", "spc", "off"]), num_slots=st.integers(1, 3), ops=st.lists(OPS, min_size=1, max_size=8))
def test_cached_equals_uncached(tiny_lm, oracle, mode, num_slots, ops, runner):
    client = make_client(tiny_lm, num_slots=num_slots, cache_mode=mode, cache_min_tokens=8, prefill_chunk=16, prefill_budget=24, runner=runner)
    convs: list[list[Message]] = [[Message("system", "You are a helpful assistant.")], [], []]
    for n, op in enumerate(ops):
        conv = convs[op[1]]
        if op[0] == "typed":
            if not conv or conv[-1].role != "user":
                for k, cut in enumerate(op[3]):
                    draft = op[2][: max(1, int(len(op[2]) * cut))] if isinstance(cut, float) else cut
                    warmed = client.run(Chat(f"w{n}.{k}", tuple(conv + [Message("user", draft)]), SamplingParams(max_tokens=0)))
                    assert isinstance(warmed[-1], Done), warmed[-1]
            op = ("turn", op[1], op[2])
        msgs = request_for(op, conv, long_text=LONG)
        done = chat(client, f"r{n}", msgs, MAX)
        assert list(done.token_ids) == oracle.chat(msgs, MAX), (mode, op, done.stats)
        conv.append(Message("assistant", done.text))


@RUNNERS
@SETTINGS
@given(lengths=st.lists(st.integers(1, 40), min_size=2, max_size=5), max_tokens=st.lists(st.integers(1, 12), min_size=5, max_size=5))
def test_batched_equals_unbatched(tiny_lm, oracle, lengths, max_tokens, runner):
    """Sequences of different lengths join and leave the decode batch at different times."""
    client = make_client(tiny_lm, num_slots=5, prefill_chunk=8, prefill_budget=8, runner=runner)
    cmds, expected = [], {}
    for i, n in enumerate(lengths):
        msgs = [Message("user", ("abc déf " * n)[: n * 3])]
        cmds.append(Chat(f"b{i}", tuple(msgs), SamplingParams(max_tokens=max_tokens[i])))
        expected[f"b{i}"] = oracle.chat(msgs, max_tokens[i])
    results = run_all(client, cmds)
    for rid, events in results.items():
        assert isinstance(events[-1], Done) and list(events[-1].token_ids) == expected[rid]


SESSION_OPS = st.lists(
    st.one_of(st.tuples(st.just("append"), TEXT), st.tuples(st.just("generate"), st.integers(1, 8)), st.tuples(st.just("stop"), st.integers(1, 8)),
              st.tuples(st.just("truncate"), st.floats(0, 1))),  # a barge-in: the reply becomes what was heard
    min_size=1,
    max_size=8,
)


@RUNNERS
@SETTINGS
@given(system=st.one_of(st.none(), TEXT), ops=SESSION_OPS, mode=st.sampled_from(["imc+spc", "off"]))
def test_session_equals_uncached(tiny_lm, oracle, system, ops, mode, runner):
    """A session's ids grow, except where a reply is truncated to what the user heard (it then
    holds that text's canonical ids); each reply equals an uncached run over exactly those ids."""
    t = tiny_lm.template
    client = make_client(tiny_lm, num_slots=2, cache_mode=mode, prefill_chunk=16, runner=runner)
    assert isinstance(client.run(CreateSession("c", "s", system))[-1], Done)
    history = [Message("system", system)] if system else []
    ids = t.encode(history).ids if history else []
    reply_at = None  # where the last reply starts in ids, while it is the last message
    for n, op in enumerate(ops):
        if op[0] == "truncate":
            words = history[-1].content.split() if reply_at is not None else []
            heard = " ".join(words[: int(len(words) * op[1])])
            end = client.run(TruncateReply(f"t{n}", "s", heard))[-1]
            if reply_at is None:  # nothing to truncate: refused, nothing changes
                assert isinstance(end, ErrorEvent) and end.code == "invalid_request", end
                continue
            assert isinstance(end, Done), end
            del ids[reply_at:]
            history.pop()
            if heard:
                ids += t.encode_delta(history, [Message("assistant", heard)]).ids
                history.append(Message("assistant", heard))
            else:
                reply_at = None
            continue
        if op[0] == "append":
            msg = Message("user", op[1])
            assert isinstance(client.run(AppendInput(f"a{n}", "s", (msg,)))[-1], Done)
            ids += t.encode_delta(history, [msg]).ids
            history.append(msg)
            reply_at = None
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
        if out:  # the worker keeps a reply only if it has tokens
            reply_at = len(ids)
            history.append(Message("assistant", done.text))
        ids += t.gen_prompt_ids + out + t.close_after_reply(out)


@pytest.fixture
def ctrl_c(tiny_lm):
    """The hook, plus a record of the worker dropping a KV that disagreed with its ids (the
    admission's last line of defence): with Ctrl-C held back during steps it never fires."""
    import logging

    hook = CtrlC(tiny_lm)
    hook.dropped = []
    handler = logging.Handler(logging.ERROR)
    handler.emit = lambda record: hook.dropped.append(record.getMessage())
    logger = logging.getLogger("desktop.workers.admission")
    logger.addHandler(handler)
    yield hook
    logger.removeHandler(handler)
    hook.close()


STOP_TURNS = st.lists(
    st.tuples(
        TEXT,
        st.sampled_from(["stop", "ctrl-c", "queued", "none"]),  # how the reply ends
        st.integers(1, 10),  # after how many chunks (stop) or forwards (ctrl-c)
        st.sampled_from(["cli", "window", "stripped"]),  # how the partial reply comes back as history
    ),
    min_size=1,
    max_size=5,
)


def _stopped_turn(client, ctrl_c, rid: str, msgs, how: str, at: int) -> tuple[Done, str]:
    """Run one turn the terminal chat's way; stop it as `how` says. Returns Done and the streamed text."""
    cmd = Chat(rid, tuple(msgs), SamplingParams(max_tokens=STOP_MAX))
    if how == "queued":  # stopped before it left the queue
        client.submit(cmd)
        client.submit(Stop(rid))
        cmd = None
    ctrl_c.armed_at, ctrl_c.calls = (at if how == "ctrl-c" else 0), 0
    stream, streamed, done, chunks = client.stream(cmd, rid), "", None, 0
    while done is None:
        try:
            for event in stream:
                if isinstance(event, ChunkEvent):
                    streamed += event.text_delta
                    chunks += 1
                    if how == "stop" and chunks == at:
                        client.submit(Stop(rid))
                elif isinstance(event, Done):
                    done = event
                else:
                    assert not isinstance(event, ErrorEvent), event
        except KeyboardInterrupt:  # what the terminal chat does on Ctrl-C
            client.submit(Stop(rid))
            stream = client.stream(None, rid)
    ctrl_c.armed_at = 0
    return done, streamed


STOP_MAX = 12


@RUNNERS
@SETTINGS
@given(mode=st.sampled_from(["imc+spc", "imc", "off"]), num_slots=st.integers(1, 2), turns=STOP_TURNS)
def test_stop_then_continue_equals_uncached(tiny_lm, oracle, ctrl_c, mode, num_slots, turns, runner):
    """Replies stopped at random points (Stop, or Ctrl-C in the middle of a forward), the partial
    reply sent back as history the way the terminal chat (Done.text, even empty) and the window
    (the text, or nothing when empty) send it: cached output equals uncached, integrity every step."""
    client = make_client(tiny_lm, num_slots=num_slots, cache_mode=mode, cache_min_tokens=8, prefill_chunk=16, prefill_budget=24, runner=runner)
    conv = [Message("system", "You are a helpful assistant.")]
    for n, (text, how, at, shape) in enumerate(turns):
        conv.append(Message("user", text))
        done, streamed = _stopped_turn(client, ctrl_c, f"s{n}", conv, how, at)
        expected = oracle.chat(conv, STOP_MAX)
        if done.stats.finish_reason in ("stopped", "cancelled"):
            assert list(done.token_ids) == expected[: len(done.token_ids)], (mode, how, done.stats)
        else:
            assert list(done.token_ids) == expected, (mode, how, done.stats)
        reply = {"cli": done.text, "window": done.text or streamed, "stripped": done.text.strip()}[shape]
        if reply or shape == "cli":  # the window keeps no empty reply; the terminal chat does
            conv.append(Message("assistant", reply))
    assert not ctrl_c.dropped, ctrl_c.dropped
