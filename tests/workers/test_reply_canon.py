"""A reply's own generated ids are its canonical tokens (issue 22 §0): a follow-up reads only its
new message, even where the reply's text tokenises otherwise today; an edited reply, or one a
stop string cut, falls back to its text's tokens and stays exact."""

from __future__ import annotations

from array import array
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from worker_helpers import A, S, U, chat, make_client

from desktop.model.chunks import Chunk, ChunkMemo
from desktop.model.messages import Message
from desktop.model.params import SamplingParams
from desktop.protocol import AppendInput, Chat, CreateSession, Done, Generate, PrefillDone


def diverges(t, generated: list[int], text: str) -> bool:
    """Whether the reply's text tokenises (today) into other ids than the ones generated."""
    content = generated[:-1] if generated and generated[-1] in t.eos_ids else generated
    return t.control.encode(text) != content


def follow_up_new(t, conv: list[Message], generated: list[int], user: Message) -> int:
    """What a follow-up may prefill when the reply is read as generated: its last generated id
    (never fed to the KV), the reply's close, the new message and the reply prompt."""
    return 1 + len(t.close_after_reply(generated)) + len(t.encode_delta(conv, [user]).ids) + len(t.gen_prompt_ids)


def served(client, msgs: list[Message]):
    """The slot that now holds `msgs` (its reply included)."""
    slots = [s for s in client.worker.scheduler.table.slots if s.msgs == tuple(msgs)]
    assert slots, [s.msgs for s in client.worker.scheduler.table.slots]
    return max(slots, key=lambda s: s.last_used)


def test_follow_up_reads_only_the_new_message(tiny_lm, oracle):
    """Fails before issue 22: the follow-up re-read the reply from where its text's tokens differ."""
    t, client = tiny_lm.template, make_client(tiny_lm, num_slots=2)
    conv = [S, U("question about trains")]
    first = chat(client, "a", conv, 24)
    generated = list(first.token_ids)
    assert diverges(t, generated, first.text)  # the case of the issue: the text tokenises otherwise
    conv.append(A(first.text))
    assert served(client, conv).canon[-len(generated) - 2 :] == generated + t.close_after_reply(generated)
    user = U("and then?")
    second = chat(client, "b", conv + [user], 6)
    assert second.stats.new_tokens == follow_up_new(t, conv, generated, user)
    assert list(second.token_ids) == oracle.chat(conv + [user], 6)  # the oracle reads the reply as generated too


def test_the_slot_keeps_the_reply_ids_when_the_memo_forgot(tiny_lm, oracle, monkeypatch):
    t, client = tiny_lm.template, make_client(tiny_lm, num_slots=2)
    conv = [S, U("question about boats")]
    first = chat(client, "a", conv, 24)
    generated = list(first.token_ids)
    conv.append(A(first.text))
    canon = list(served(client, conv).canon)
    monkeypatch.setattr(t, "memo", ChunkMemo())  # the memo forgot the reply (bounded: an LRU)
    assert t.encode(conv).ids != canon  # today's tokens of its text are other ids
    user = U("and then?")
    second = chat(client, "b", conv + [user], 6)
    assert second.stats.new_tokens == follow_up_new(t, conv, generated, user)
    expected = oracle.ids(canon + t.encode_delta(conv, [user]).ids + t.gen_prompt_ids, 6)
    assert list(second.token_ids) == expected


def test_a_seed_outlives_a_tokenisation_begun_before_it():
    """The tokenizer stage may have tokenised the reply's text before the loop seeded its ids:
    its `put` then keeps (and returns) the seeded chunk."""
    memo = ChunkMemo()
    generated, tokenised = Chunk("text", array("q", [1, 2, 3])), Chunk("text", array("q", [4, 5]))
    memo.seed("key", generated)
    assert memo.put("key", tokenised) is generated and memo.get("key") is generated
    memo.seed("key", tokenised)  # a later reply of the same text replaces it
    assert memo.get("key") is tokenised


def test_a_reply_cut_by_a_stop_string_or_edited_falls_back(tiny_lm, oracle):
    t, client = tiny_lm.template, make_client(tiny_lm, num_slots=2)
    conv = [S, U("question about trains")]
    full = chat(client, "a", conv, 24)
    stop = full.text[len(full.text) // 2 :][:2]
    events = client.run(Chat("s", tuple(conv), SamplingParams(max_tokens=24, stop=(stop,))))
    cut = events[-1]
    assert isinstance(cut, Done) and cut.text != full.text
    reply = A(cut.text)
    assert t._spelled(conv, reply, list(cut.token_ids), t.gen_prompt_ids + list(cut.token_ids)) is None
    slot = served(client, conv + [reply])
    assert slot.canon[slot.bounds[-2] :] == t.encode_delta(conv, [reply]).ids  # its text's tokens
    for n, text in enumerate([cut.text, full.text + "\n\n- edited", full.text + "  "]):
        msgs = conv + [A(text), U("and then?")]
        done = chat(client, f"f{n}", msgs, 6)
        assert list(done.token_ids) == oracle.chat(msgs, 6)


def test_a_session_turn_after_a_reply_reads_only_the_new_message(tiny_lm):
    """A call's session keeps its generated ids (session.pending): nothing is read twice."""
    t, client = tiny_lm.template, make_client(tiny_lm, num_slots=2)
    assert isinstance(client.run(CreateSession("c", "s", "You are a helpful assistant."))[-1], Done)
    history = [S, U("Write two paragraphs and a list.")]
    assert isinstance(client.run(AppendInput("a1", "s", (history[1],)))[-1], Done)
    reply = client.run(Generate("g1", "s", SamplingParams(max_tokens=24)))[-1]
    generated = list(reply.token_ids)
    assert diverges(t, generated, reply.text)
    history.append(A(reply.text))
    user = U("and then?")
    prefilled = 0
    for cmd in (AppendInput("a2", "s", (user,)), Generate("g2", "s", SamplingParams(max_tokens=4))):
        events = client.run(cmd)
        prefilled += sum(e.input_tokens - e.cached_tokens for e in events if isinstance(e, PrefillDone))
    assert prefilled == follow_up_new(t, history, generated, user)


# ---------------------------------------------------------------------- property

SUPPLIED = st.lists(  # replies a client sends: paragraph breaks, lists, code, emoji, trailing spaces
    st.sampled_from(["Sure.\n\n", "First paragraph.", "\n\n", "- item one\n", "- item two", "1. first\n2. second\n",
                     "```python\ndef f(x):\n    return x * 2\n```\n", "🙂", "🎉 done", "日本語 ", "trailing   ", " \n",
                     "**bold** text", "\t", "é"]),
    min_size=1, max_size=6,
).map("".join)
USER = st.text(alphabet=list("abcdefgh ijk.?\n🙂"), min_size=1, max_size=20)
OPS = st.lists(st.one_of(
    st.tuples(st.just("turn"), USER, st.integers(1, 16)),  # a follow-up to the reply as generated
    st.tuples(st.just("supplied"), SUPPLIED, USER),  # the client's own text of the reply
    st.tuples(st.just("edit"), SUPPLIED, USER),  # the reply, edited (text added)
    st.tuples(st.just("stop"), USER),  # a stop string cuts the reply
    st.tuples(st.just("regen"), st.integers(1, 16)),
), min_size=1, max_size=6)


def test_follow_ups_read_only_new_messages_and_stay_exact(tiny_lm, oracle):
    """Random conversations; the property runs inside so that the counter can prove it met
    generated replies whose text tokenises otherwise (and spelled them as generated)."""
    seen: Counter = Counter()

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(ops=OPS, slots=st.integers(1, 3))
    def prop(ops, slots):
        t = tiny_lm.template
        client = make_client(tiny_lm, num_slots=slots, cache_min_tokens=8, prefill_chunk=16)
        conv: list[Message] = [S, U("hello")]
        done = chat(client, "r0", conv, 8)
        first = list(done.token_ids)
        full = t.gen_prompt_ids + first + t.close_after_reply(first)
        conv.append(A(done.text))
        # the last reply's ids while it is read as generated (its text had no other ids here first)
        last = first if t.encode(conv).ids[-len(full):] == full else None
        for n, op in enumerate(ops, 1):
            as_generated = last is not None
            if op[0] == "regen":
                conv.pop()
                msgs, limit, stop = list(conv), op[1], ()
            else:
                if op[0] in ("supplied", "edit"):
                    conv[-1] = A(op[1] if op[0] == "supplied" else conv[-1].content + op[1])
                    as_generated = False
                conv.append(U(op[1] if op[0] in ("turn", "stop") else op[2]))
                msgs, limit, stop = list(conv), (op[2] if op[0] == "turn" else 8), ()
            if op[0] == "stop":
                probe = t.tokenizer.decode(oracle.chat(msgs, 12), skip_special_tokens=True)  # the reply to cut
                stop = (probe[len(probe) // 2 :][:1],) if len(probe) > 1 else ()
            events = client.run(Chat(f"r{n}", tuple(msgs), SamplingParams(max_tokens=limit, stop=stop)))
            done = events[-1]
            assert isinstance(done, Done), done
            # (b) cached == uncached, "uncached" tokenising the history as the cached path's canon does
            ids = t.encode(msgs).ids
            assert list(done.token_ids) == oracle.ids(ids + t.gen_prompt_ids, limit)[: len(done.token_ids)]
            if not stop:
                assert list(done.token_ids) == oracle.ids(ids + t.gen_prompt_ids, limit)
            slot = served(client, msgs + [A(done.text)])
            assert slot.canon[: len(ids)] == ids, "the cached path read the history otherwise"
            # (a) after the reply as generated, only the new message (and the markers) is read
            if op[0] in ("turn", "stop") and as_generated:
                assert done.stats.new_tokens == follow_up_new(t, msgs[:-1], last, msgs[-1]), op
                seen["follow-up"] += 1
                if diverges(t, last, msgs[-2].content):
                    seen["divergent"] += 1
            if op[0] in ("supplied", "edit"):
                seen["fallback"] += 1
            generated = list(done.token_ids)
            reply = A(done.text)
            full = t.gen_prompt_ids + generated + t.close_after_reply(generated)
            spelled = t._spelled(msgs, reply, generated, full)
            seen["spelled" if spelled is not None else "not spelled"] += 1
            # read as generated: spelled, and its text had no other ids here already (the first
            # ids of a text in a context stay canonical: bytes cut short decode alike)
            kept = spelled is not None and t.encode(msgs + [reply]).ids[-len(full):] == full
            seen["kept first"] += spelled is not None and not kept
            last = generated if kept else None
            conv.append(reply)

    prop()
    print(dict(seen))
    assert seen["divergent"] >= 5 and seen["fallback"] >= 5 and seen["not spelled"] >= 1, seen
