"""A remote worker's sessions take drafts too (issue 21): the host keeps a session's messages and
sends them whole with each reply, so a draft is only bookkeeping there: the next input replaces
it, an empty draft withdraws it, a reply's own final words replace it."""

from __future__ import annotations

from desktop.model.messages import Message
from desktop.workers.remote.slots import RemoteSlots


def test_a_remote_sessions_draft_is_replaced_withdrawn_or_made_final():
    slots = RemoteSlots(1)
    slot = slots.slots[slots.for_session("s")]
    slot.append([Message("system", "Be brief.")])
    slot.append([Message("user", "what is")], draft=True)
    slot.append([Message("user", "what is the")], draft=True)
    assert [m.content for m in slot.messages] == ["Be brief.", "what is the"] and slot.draft_at == 1
    slot.append([], draft=True)  # withdrawn
    assert [m.content for m in slot.messages] == ["Be brief."] and slot.draft_at is None
    slot.append([Message("user", "hi")], draft=True)
    slot.append([Message("user", "hello")])  # the final words (a Generate's, or an AppendInput)
    slot.append([Message("assistant", "Hello!")])
    assert [m.content for m in slot.messages] == ["Be brief.", "hello", "Hello!"] and slot.draft_at is None
    slot.append([Message("user", "bye")], draft=True)
    slots.end_session("s")
    assert slot.messages == [] and slot.draft_at is None
