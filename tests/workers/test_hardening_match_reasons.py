"""The reason a turn reuses only a shared prefix is the true one (issue 8, item 15): a new chat with
another conversation's system prompt is not "branched", a follow-up whose own cache is gone is
not "edited", an edit is "edited", a regenerate is a hit."""

from __future__ import annotations

import pytest
from worker_helpers import A, S, U, chat, make_client


pytestmark = pytest.mark.hardening

def test_reasons_of_shared_prefix_reuse(tiny_lm):
    client = make_client(tiny_lm, num_slots=2)
    first = chat(client, "a1", [S, U("hello there")])
    assert (first.stats.kind, first.stats.miss_reason) == ("spc", "new conversation")
    a = [S, U("hello there"), A(first.text), U("tell me more")]
    second = chat(client, "a2", a)
    assert (second.stats.kind, second.stats.miss_reason) == ("extend", "history cached")
    a.append(A(second.text))

    edited = chat(client, "e", a[:3] + [U("tell me less")])  # the last user message, edited
    assert (edited.stats.kind, edited.stats.miss_reason) == ("prefix", "edited")
    branch = a[:3] + [U("tell me less"), A(edited.text)]

    other = chat(client, "b", [S, U("another topic")])  # two slots: it takes the branch's slot
    assert (other.stats.kind, other.stats.miss_reason) == ("prefix", "new conversation")  # issue 19: one reason

    follow = chat(client, "f", branch + [U("and then?")])  # not edited: its own cache is gone
    assert (follow.stats.kind, follow.stats.miss_reason) == ("prefix", "evicted")  # its slot went to "b"

    again = chat(client, "r", branch + [U("and then?")])  # regenerate
    assert (again.stats.kind, again.stats.miss_reason) == ("hit", "history cached")


def test_a_new_chat_that_only_starts_like_a_cached_one(tiny_lm):
    client = make_client(tiny_lm, num_slots=2, cache_min_tokens=4)
    chat(client, "a", [U("Please summarise this long paragraph about trains")])
    done = chat(client, "b", [U("Please summarise this long paragraph about boats")])
    assert (done.stats.kind, done.stats.miss_reason) == ("prefix", "new conversation")


def test_a_conversation_from_before_the_model_loaded(tiny_lm):
    """A chat continued after the model was reloaded (or the app restarted) is a miss whose reason
    says so, not a mere "not cached"."""
    before = make_client(tiny_lm, num_slots=2)
    first = chat(before, "a", [S, U("hello there")])
    reloaded = make_client(tiny_lm, num_slots=2)
    done = chat(reloaded, "b", [S, U("hello there"), A(first.text), U("and then?")])
    assert done.stats.kind == "spc" and done.stats.miss_reason == "not cached since the model loaded"
