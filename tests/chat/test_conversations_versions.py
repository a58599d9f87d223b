"""The kept versions of a regenerated reply: how they grow (at most MAX_VERSIONS), switching, and
saving: they load back, and a file written before versions existed loads unchanged."""

from __future__ import annotations

import json

from desktop.chat import branches
from desktop.chat.conversations import ConversationStore, StoredMessage
from desktop.chat.reply_versions import MAX_VERSIONS, ReplyVersion, count, succeed, switch


def regenerated(texts: list[str]) -> StoredMessage:
    """The reply after writing each text in turn (each a Regenerate of the one before)."""
    msg = StoredMessage("assistant", texts[0], {"generated_tokens": 0})
    for i, text in enumerate(texts[1:], 1):
        new = StoredMessage("assistant", text, {"generated_tokens": i})
        succeed(new, msg)
        msg = new
    return msg


def everyone(msg: StoredMessage) -> list[str]:
    texts = [v.content for v in msg.versions]
    texts.insert(msg.shown, msg.content)
    return texts


def test_regenerating_keeps_every_version_in_order_and_shows_the_newest():
    msg = regenerated(["a", "b", "c"])
    assert count(msg) == 3 and msg.shown == 2 and msg.content == "c" and everyone(msg) == ["a", "b", "c"]
    assert switch(msg, 1) and msg.content == "b" and msg.stats == {"generated_tokens": 1} and msg.shown == 1
    assert everyone(msg) == ["a", "b", "c"] and [v.stats["generated_tokens"] for v in msg.versions] == [0, 2]
    assert not switch(msg, 1) and not switch(msg, 3) and not switch(msg, -1)  # shown already, out of range
    new = StoredMessage("assistant", "d")  # regenerating while "b" is shown keeps "b" where it was
    succeed(new, msg)
    assert everyone(new) == ["a", "b", "c", "d"] and new.shown == 3


def test_at_most_max_versions_are_kept_the_oldest_go_first():
    texts = [str(i) for i in range(MAX_VERSIONS + 3)]
    msg = regenerated(texts)
    assert count(msg) == MAX_VERSIONS and everyone(msg) == texts[-MAX_VERSIONS:] and msg.content == texts[-1]


def test_versions_are_saved_and_load_back(tmp_path):
    store = ConversationStore(tmp_path)
    conv = store.new()
    reply = regenerated(["first", "second", "third"])
    switch(reply, 0)
    conv.messages = [StoredMessage("user", "hi"), reply, StoredMessage("user", "more")]
    store.save(conv)
    back = ConversationStore(tmp_path).get(conv.id).messages[1]
    assert back.content == "first" and back.shown == 0 and everyone(back) == ["first", "second", "third"]
    assert back.stats == {"generated_tokens": 0} and back.versions[1].stats == {"generated_tokens": 2}
    branches.edit(conv, 0, "hello")  # the reply goes into the kept branch with its versions
    store.save(conv)
    kept = ConversationStore(tmp_path).get(conv.id).messages[0].branches[0].messages[1]
    assert everyone(kept) == everyone(reply) and kept.shown == 0
    copy = conv.messages[0].copy()  # a copy shares no versions with what it copies
    assert copy.branches[0].messages[1].versions is not conv.messages[0].branches[0].messages[1].versions


def test_an_old_file_without_versions_loads_unchanged(tmp_path):
    old = {"version": 1, "id": "old1", "title": "Old", "created": 1.7e9, "updated": 1.7e9,
           "messages": [{"role": "user", "content": "hi", "created": 1.7e9},
                        {"role": "assistant", "content": "hello", "stats": {"generated_tokens": 3}, "created": 1.7e9}]}
    (tmp_path / "old1.json").write_text(json.dumps(old))
    reply = ConversationStore(tmp_path).get("old1").messages[-1]
    assert reply.content == "hello" and reply.versions == [] and reply.shown == 0 and count(reply) == 1


def test_damaged_versions_fall_back_without_losing_the_reply(tmp_path):
    data = {"id": "bad1", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "shown", "shown": 7,
         "versions": [{"content": "kept", "stats": {"generated_tokens": "x"}}, {"text": "no content"}, 3]}]}
    (tmp_path / "bad1.json").write_text(json.dumps(data))
    reply = ConversationStore(tmp_path).get("bad1").messages[-1]
    assert reply.content == "shown" and [v.content for v in reply.versions] == ["kept"]
    assert reply.shown == 1 and reply.versions[0].stats is None  # out of range: shown last
    assert isinstance(reply.versions[0], ReplyVersion)
