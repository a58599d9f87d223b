"""Drafts in a session, without a model (the scheduler's stub rig): the user's words appended
provisionally while they speak; the next input replaces them, keeping the KV's common prefix and
prefilling only the rest; a withdrawn or failed draft leaves the session as it was; a Generate
brings the final words itself (one command) or makes the draft final."""

from __future__ import annotations

import pytest
from test_scheduler import END, GEN, Rig, S, U, session_cmd, tok

from desktop.errors import InvalidRequest
from desktop.model.params import SamplingParams
from desktop.protocol import AppendInput, CreateSession, Generate
from desktop.workers.kv_ops import Clear, Crop


def draft(rig: Rig, rid: str, text: str | None) -> object:
    """A draft of the user's words (None: withdraw it), run to its end."""
    msgs = (U(text),) if text is not None else ()
    return rig.run(session_cmd(rig, AppendInput(rid, "s", msgs, draft=True), msgs))[0]


def generate(rig: Rig, rid: str, text: str | None = None, max_tokens: int = 3) -> object:
    msgs = (U(text),) if text is not None else ()
    cmd = Generate(rid, "s", SamplingParams(max_tokens=max_tokens), msgs)
    return rig.run(session_cmd(rig, cmd, msgs, SamplingParams(max_tokens=max_tokens)))[0]


def opened(system: bool = True, **config) -> tuple[Rig, object]:
    rig = Rig(num_slots=2, **config)
    rig.run(session_cmd(rig, CreateSession("c", "s", "be brief" if system else None), [S] if system else []))
    return rig, rig.s.sessions["s"]


def user_ids(text: str) -> list[int]:
    return [6] + tok(text) + [END]


def test_a_growing_draft_prefills_only_what_is_new_and_the_reply_only_the_rest():
    rig, session = opened()
    base = list(session.slot.ids)
    first = draft(rig, "d1", "what is")
    assert first.cached == len(base) and session.slot.ids == base + user_ids("what is")
    second = draft(rig, "d2", "what is the")
    # the KV kept the header and "what is"; the old END was cropped, " the" + END prefilled
    assert second.cached == len(base) + 1 + len("what is") and Crop(session.slot.index, second.cached) in rig.runner.log
    assert session.history == [S, U("what is the")] and session.draft.messages == 1 and session.draft.ids == len(base)
    gen = generate(rig, "g", "what is the time")
    assert gen.cached == len(base) + 1 + len("what is the") and gen.prompt == base + user_ids("what is the time") + GEN
    assert session.history[:2] == [S, U("what is the time")] and session.history[2].role == "assistant"
    assert session.draft is None and rig.runner.kv[session.slot.index] == session.slot.ids


def test_an_edited_draft_is_cropped_where_it_differs():
    rig, session = opened()
    base = list(session.slot.ids)
    draft(rig, "d1", "I would like tea")
    edited = draft(rig, "d2", "I would lick")
    assert edited.cached == len(base) + 1 + len("I would li")
    assert rig.runner.kv[session.slot.index] == session.slot.ids == base + user_ids("I would lick")


def test_a_withdrawn_draft_leaves_the_session_as_it_was_and_its_reply_truncatable():
    rig, session = opened()
    rig.run(session_cmd(rig, AppendInput("a", "s", (U("hi"),)), [U("hi")]))
    generate(rig, "g")  # replies "oka"
    before_ids, before_history, reply_at = session.slot.ids + session.pending, list(session.history), session.reply_at
    draft(rig, "d1", "and then")
    with pytest.raises(InvalidRequest, match="draft"):
        rig.s.truncate_reply("s", "ok")  # a barge-in's trim comes before the next words, never after
    withdrawn = draft(rig, "d2", None)
    assert rig.ended["d2"] == "prefilled" and withdrawn.to_prefill == 0
    assert session.slot.ids + session.pending == before_ids and session.history == before_history
    assert session.draft is None and session.reply_at == reply_at
    assert rig.runner.kv[session.slot.index] == session.slot.ids
    rig.s.truncate_reply("s", "o")  # the reply is the last message again
    assert session.history[-1].content == "o"


def test_a_generate_without_words_makes_the_draft_final_and_an_append_replaces_it():
    rig, session = opened()
    base = list(session.slot.ids)
    draft(rig, "d1", "hello")
    gen = generate(rig, "g")
    assert gen.prompt == base + user_ids("hello") + GEN and gen.placement.kind == "hit"
    assert session.draft is None and session.history[1] == U("hello")
    after = session.slot.ids + session.pending
    draft(rig, "d2", "more")
    rig.run(session_cmd(rig, AppendInput("a", "s", (U("most"),)), [U("most")]))  # a final append replaces it
    assert session.draft is None and session.history[-1] == U("most") and session.history[-2].role == "assistant"
    assert session.slot.ids + session.pending == after + user_ids("most")


def test_a_draft_stopped_mid_prefill_is_still_replaced_whole():
    rig, session = opened(prefill_chunk=4, prefill_budget=4)
    base = list(session.slot.ids)
    seq = session_cmd(rig, AppendInput("d1", "s", (U("a long partial sentence"),), draft=True), [U("a long partial sentence")])
    rig.tick()
    rig.s.stop("d1")
    rig.run(seq)
    kept = len(session.slot.ids)  # the header and the first ids of the words: fewer than agree with the final ones
    assert rig.ended["d1"] == "cancelled" and len(base) < kept < len(base) + 1 + len("a long ")
    gen = generate(rig, "g", "a long day")
    assert gen.prompt == base + user_ids("a long day") + GEN and gen.cached == kept
    assert session.history[1] == U("a long day") and rig.runner.kv[session.slot.index] == session.slot.ids


def test_a_failed_draft_is_withdrawn_and_the_session_rebuilt_from_its_messages():
    rig, session = opened()
    draft(rig, "d1", "first words")
    seq = session_cmd(rig, AppendInput("d2", "s", (U("first word"),), draft=True), [U("first word")])
    rig.s.admit(rig.s.next_waiting())
    rig.sync()
    rig.s.fail(seq)
    rig.sync()
    assert session.draft is None and session.history == [S] and Clear(session.slot.index) in rig.runner.log
    assert session.pending == [5] + tok("be brief") + [END] and session.slot.ids == []
    gen = generate(rig, "g", "first")
    assert gen.prompt == [5] + tok("be brief") + [END] + user_ids("first") + GEN and gen.cached == 0
