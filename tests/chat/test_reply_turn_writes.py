"""Issue 20, item 5: a Reply (chat/reply.py) is the only writer of its conversation's messages
during a turn: it adds and saves the user's message that starts it (`Reply.ask`), takes the last
reply out itself for Regenerate (`again`), and takes a refused message back out (`take_back`).
Scripted gateway, no model."""

from __future__ import annotations

import pytest

from desktop.chat.conversations import ConversationStore, StoredMessage
from desktop.chat.reply import Reply
from desktop.chat.reply_versions import count
from desktop.model.params import SamplingParams
from desktop.protocol import ErrorEvent
from gw_helpers import run
from test_hardening_reply import Script


def test_ask_adds_the_users_message_and_saves_it_before_the_model_sees_it(tmp_path) -> None:
    store = ConversationStore(tmp_path)
    conv = store.new("Be brief.")
    Reply.ask(store, conv, StoredMessage("user", "Hello?"))
    assert [m.content for m in conv.messages] == ["Hello?"]
    on_disk = ConversationStore(tmp_path).get(conv.id)
    assert on_disk is not None and [(m.role, m.content) for m in on_disk.messages] == [("user", "Hello?")]


def test_again_takes_the_last_reply_out_and_keeps_it_as_a_version(tmp_path) -> None:
    store = ConversationStore(tmp_path)
    conv = store.new("")
    Reply.ask(store, conv, StoredMessage("user", "Hi"))
    old = StoredMessage("assistant", "Hello there")
    conv.messages.append(old)
    reply = Reply(Script(["Hey"], [0.0]), store, conv, SamplingParams(), again=True)
    assert reply.previous is old and old not in conv.messages
    assert conv.messages[-1] is reply.message and reply.at == 1 and len(conv.messages) == 2
    run(reply.run())
    assert conv.messages[-1].content == "Hey" and count(conv.messages[-1]) == 2


def test_again_brings_the_old_reply_back_when_no_new_text_arrives(tmp_path) -> None:
    store = ConversationStore(tmp_path)
    conv = store.new("")
    Reply.ask(store, conv, StoredMessage("user", "Hi"))
    old = StoredMessage("assistant", "Hello there")
    conv.messages.append(old)
    reply = Reply(Script([], [0.0]), store, conv, SamplingParams(), again=True)
    run(reply.run())
    assert conv.messages[-1] is old


def test_again_refuses_a_conversation_that_does_not_end_with_a_reply(tmp_path) -> None:
    store = ConversationStore(tmp_path)
    conv = store.new("")
    Reply.ask(store, conv, StoredMessage("user", "Hi"))
    with pytest.raises(ValueError):
        Reply(Script(["x"], [0.0]), store, conv, SamplingParams(), again=True)
    assert [m.content for m in conv.messages] == ["Hi"]


def test_take_back_gives_the_refused_message_after_the_end_only(tmp_path) -> None:
    store = ConversationStore(tmp_path)
    conv = store.new("")
    Reply.ask(store, conv, StoredMessage("user", "A very long message"))
    refusal = ErrorEvent("r1", "context_length_exceeded", "too long", False)
    reply = Reply(Script([], [0.0], end=refusal), store, conv, SamplingParams())
    assert reply.take_back() is None  # not ended: nothing is taken
    run(reply.run())
    assert reply.error is not None and [m.content for m in conv.messages] == ["A very long message"]
    message = reply.take_back()
    assert message is not None and message.content == "A very long message" and conv.messages == []
    assert reply.take_back() is None  # the conversation no longer ends with it


class Broken(ConversationStore):
    """A store whose disk is full once `full` is set."""

    full = False

    def save(self, conv) -> None:
        if self.full:
            raise OSError(28, "No space left on device")
        super().save(conv)


def test_ask_edited_branches_and_saves_or_leaves_the_conversation_as_it_was(tmp_path) -> None:
    store = Broken(tmp_path)
    conv = store.new("")
    Reply.ask(store, conv, StoredMessage("user", "Hi"))
    conv.messages.append(StoredMessage("assistant", "Hello"))
    store.full = True
    with pytest.raises(OSError):
        Reply.ask_edited(store, conv, 0, "Hi again", [])
    assert [(m.content, len(m.branches)) for m in conv.messages] == [("Hi", 0), ("Hello", 0)]
    with pytest.raises(ValueError):
        Reply.ask_edited(store, conv, 1, "not a user message", [])
    store.full = False
    edit = Reply.ask_edited(store, conv, 0, "Hi again", [])
    assert edit.index == 0 and [m.content for m in conv.messages] == ["Hi again"]
    on_disk = ConversationStore(tmp_path).get(conv.id)
    assert on_disk is not None and [m.content for m in on_disk.messages] == ["Hi again"]
