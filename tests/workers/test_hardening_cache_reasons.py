"""Issue 19, new-user item 1: one vocabulary of cache reasons, always the true one, and a hit
rate counted by reused history tokens (not by requests whose system prompt matched).

Each situation a user meets gets its reason from protocol/reasons.CacheReason: a new
conversation (whether or not another one shares its system prompt), a continued one, an edit,
an eviction, a restart (whole or partial matches alike), history the model never read, and the
cache switched off."""

from __future__ import annotations

import pytest
from worker_helpers import A, S, U, chat, make_client

from desktop.protocol.reasons import SENTENCES, CacheReason, label_of, reason_of, sentence_of

pytestmark = pytest.mark.hardening

def reason(done) -> CacheReason:
    got = reason_of(done.stats.miss_reason, done.stats.kind)
    assert got is not None and done.stats.miss_reason == got.value, done.stats
    return got


def test_one_reason_for_a_new_conversation_with_or_without_a_cached_twin(tiny_lm):
    client = make_client(tiny_lm, num_slots=3)
    first = chat(client, "a", [S, U("hello there")])  # the system prompt's KV is built and kept
    assert reason(first) is CacheReason.NEW
    second = chat(client, "b", [S, U("another topic")])  # same system prompt, another conversation
    assert reason(second) is CacheReason.NEW and second.stats.cached_tokens > 0
    plain = chat(client, "c", [U("no system prompt")])
    assert reason(plain) is CacheReason.NEW


def test_continued_edited_and_regenerated_turns(tiny_lm):
    client = make_client(tiny_lm, num_slots=2)
    first = chat(client, "a1", [S, U("hello there")])
    conv = [S, U("hello there"), A(first.text), U("tell me more")]
    second = chat(client, "a2", conv)
    assert reason(second) is CacheReason.CACHED
    # all but the reply's tail (the tiny model's bytes re-tokenise differently from what it generated)
    before_reply = len(tiny_lm.template.encode(conv[:2]).ids)
    assert before_reply < second.stats.reused_history <= second.stats.history_tokens
    edited = chat(client, "e", conv[:3] + [U("tell me less")])
    assert reason(edited) is CacheReason.EDITED
    again = chat(client, "r", conv[:3] + [U("tell me less")])  # regenerate
    assert reason(again) is CacheReason.CACHED


def test_a_partial_reuse_always_has_a_reason(tiny_lm):
    """A client that adds messages the model never read (an agent's tool results, a pasted
    exchange): part of the history is reused and the reason says why the rest is not."""
    client = make_client(tiny_lm, num_slots=2)
    first = chat(client, "a", [S, U("hello there")])
    conv = [S, U("hello there"), A(first.text), U("look at this"), A("(pasted, never generated)"), U("and?")]
    done = chat(client, "b", conv)
    assert 0 < done.stats.reused_history < done.stats.history_tokens
    assert reason(done) is CacheReason.UNSEEN_MESSAGES


def test_evicted(tiny_lm):
    client = make_client(tiny_lm, num_slots=1)
    first = chat(client, "a", [U("first conversation")])
    chat(client, "b", [U("second conversation, somewhere else")])  # one slot: the first is evicted
    back = chat(client, "c", [U("first conversation"), A(first.text), U("and then?")])
    assert reason(back) is CacheReason.EVICTED


def test_after_a_restart_whole_and_partial_matches_say_the_same(tiny_lm):
    """The issue's case: after one restart one turn said "not cached since this worker loaded"
    and another "history partly cached"; both are conversations the new worker never saw."""
    before = make_client(tiny_lm, num_slots=3)
    a1 = chat(before, "a1", [S, U("hello there")])
    a2 = chat(before, "a2", [S, U("hello there"), A(a1.text), U("go on")])
    after = make_client(tiny_lm, num_slots=3)  # the model reloaded: nothing of these is cached
    x = chat(after, "x", [S, U("hello there"), A(a1.text), U("go on"), A(a2.text), U("more")])
    assert reason(x) is CacheReason.NOT_SEEN
    # another branch of the same old conversation: its first messages match x's slot, the rest never was here
    y = chat(after, "y", [S, U("hello there"), A(a1.text), U("go elsewhere"), A("elsewhere"), U("more")])
    assert y.stats.cached_tokens > 0 and reason(y) is CacheReason.NOT_SEEN


def test_cache_switched_off(tiny_lm):
    for mode, want in (("off", CacheReason.CACHE_OFF), ("spc", CacheReason.MESSAGE_CACHE_OFF)):
        client = make_client(tiny_lm, num_slots=2, cache_mode=mode)
        first = chat(client, "a", [S, U("hello")])
        assert reason(first) is CacheReason.NEW
        done = chat(client, "b", [S, U("hello"), A(first.text), U("again")])
        assert reason(done) is want


def test_hit_rate_counts_reused_history_tokens(tiny_lm):
    """Two long conversations re-read after a restart with only their system prompt cached: not
    "100 % cache hits" (every request matched the system prompt), but the share of history reused."""
    long = "a long message that takes many tokens to read again " * 8
    before = make_client(tiny_lm, num_slots=2)
    convs = []
    for n in range(2):
        msgs = [S, U(f"{n} {long}")]
        convs.append(msgs + [A(chat(before, f"p{n}", msgs).text), U("and now?")])
    after = make_client(tiny_lm, num_slots=2)
    chat(after, "warm", [S, U("hi")])  # the system prompt is cached
    for n, msgs in enumerate(convs):
        done = chat(after, f"q{n}", msgs)
        assert done.stats.kind != "miss" and reason(done) is CacheReason.NOT_SEEN
    snap = after.worker.counters.snapshot()
    history, reused = snap["history_tokens"], snap["reused_history_tokens"]
    assert history > 300 and reused < history / 4
    assert snap["cache_hit_rate"] == pytest.approx(reused / history) and snap["cache_hit_rate"] < 0.25
    assert snap["reasons"] == {"new conversation": 1, "not cached since the model loaded": 2}


def test_the_vocabulary_has_a_plain_sentence_for_every_reason_and_reads_old_words():
    assert set(SENTENCES) == set(CacheReason)
    for r in CacheReason:
        assert SENTENCES[r].endswith(".") and label_of(r.value) == r.value and sentence_of(r.value) == SENTENCES[r]
    # words stored with messages by older versions read as the reason they meant
    assert reason_of("new conversation, same system prompt") is CacheReason.NEW
    assert reason_of("not cached since this worker loaded") is CacheReason.NOT_SEEN
    assert reason_of("", "extend") is CacheReason.CACHED and reason_of("", "prefix") is None
    assert label_of("moved from remote0 (unreachable)") == "moved from remote0 (unreachable)"
    assert "remote0 (unreachable)" in sentence_of("moved from remote0 (unreachable)")
