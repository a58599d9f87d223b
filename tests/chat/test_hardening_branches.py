"""Issue 19, new-user item 4, the engine side: an edit is a branch inside the same conversation
(chat/branches.py), not a second conversation with the same title. Edit twice, switch, save and
load, the history the gateway receives from the branch shown, old files load unchanged, and a failed
edit leaves the conversation (in memory and on disk) as it was. Scripted gateway, no model."""

from __future__ import annotations

import json

import pytest

from desktop.chat import branches
from desktop.chat.conversations import ConversationStore, StoredMessage
from desktop.chat.reply import Reply, request_messages
from desktop.model.params import SamplingParams
from desktop.protocol import ErrorEvent
from gw_helpers import run
from test_hardening_reply import Script

pytestmark = pytest.mark.hardening


def chat(store: ConversationStore, *pairs: str):
    conv = store.new("Be brief.")
    for text in pairs:
        conv.messages += [StoredMessage("user", text), StoredMessage("assistant", f"re: {text}")]
    store.save(conv)
    return conv


def texts(conv) -> list[str]:
    return [m.content for m in conv.messages]


def test_edit_twice_switch_and_load_back(tmp_path):
    store = ConversationStore(tmp_path)
    conv = chat(store, "one", "two", "three")
    title = conv.title
    first = branches.edit(conv, 2, "two, edited")
    conv.messages.append(StoredMessage("assistant", "re: two, edited"))
    assert texts(conv) == ["one", "re: one", "two, edited", "re: two, edited"]
    assert branches.position(conv.messages[2]) == (1, 2) and first == branches.Edit(2, 0)
    branches.edit(conv, 2, "two, again")
    assert branches.position(conv.messages[2]) == (2, 3) and texts(conv)[2:] == ["two, again"]
    store.save(conv)
    assert [c.id for c in store.list()] == [conv.id] and conv.title == title  # one conversation, its own title

    assert branches.switch(conv, 2, 0)  # the first: the original with everything after it
    assert texts(conv) == ["one", "re: one", "two", "re: two", "three", "re: three"]
    assert branches.position(conv.messages[2]) == (0, 3) and branches.position(conv.messages[4]) == (0, 1)
    assert not branches.switch(conv, 2, 0) and not branches.switch(conv, 2, 3) and not branches.switch(conv, 1, 0)
    store.save(conv)
    back = ConversationStore(tmp_path).get(conv.id)  # a restart
    assert texts(back) == texts(conv) and branches.position(back.messages[2]) == (0, 3)
    assert branches.switch(back, 2, 1)
    assert texts(back) == ["one", "re: one", "two, edited", "re: two, edited"]
    assert branches.switch(back, 2, 2) and texts(back) == ["one", "re: one", "two, again"]
    assert branches.switch(back, 2, 0) and texts(back)[2:] == ["two", "re: two", "three", "re: three"]
    everyone = [b.messages[0].content for b in back.messages[2].branches]
    assert everyone == ["two, edited", "two, again"]  # the others, in their order, shown one left out


def test_the_gateway_gets_the_history_of_the_branch_shown(tmp_path, ):
    store = ConversationStore(tmp_path)
    conv = chat(store, "one", "two")
    branches.edit(conv, 0, "uno")
    conv.messages.append(StoredMessage("assistant", "re: uno"))
    branches.switch(conv, 0, 0)
    conv.messages.append(StoredMessage("user", "three"))
    gateway = Script(["ok"], [0.0])
    run(Reply(gateway, store, conv, SamplingParams(max_tokens=8)).run())
    sent = gateway.sent[-1]
    assert [m["content"] for m in sent] == ["Be brief.", "one", "re: one", "two", "re: two", "three"]
    assert sent == request_messages(ConversationStore(tmp_path).get(conv.id))[:-1]  # as saved, before the reply
    assert branches.switch(conv, 0, 1)  # the other branch, with no trace of this one
    assert [m["content"] for m in request_messages(conv)] == ["Be brief.", "uno", "re: uno"]


def test_branches_inside_branches_and_copies_share_nothing(tmp_path):
    store = ConversationStore(tmp_path)
    conv = chat(store, "a", "b")
    branches.edit(conv, 2, "b2")
    conv.messages.append(StoredMessage("assistant", "re: b2"))
    branches.edit(conv, 0, "a2")  # the branch at 2 goes along inside the kept branch of 0
    store.save(conv)
    back = ConversationStore(tmp_path).get(conv.id)
    assert branches.switch(back, 0, 0) and texts(back) == ["a", "re: a", "b2", "re: b2"]
    assert branches.switch(back, 2, 0) and texts(back) == ["a", "re: a", "b", "re: b"]
    copy = back.messages[0].copy()
    copy.branches[0].messages[0].content = "changed"
    assert back.messages[0].branches[0].messages[0].content == "a2"


def test_an_old_file_loads_unchanged_and_a_damaged_branch_sets_the_file_aside(tmp_path):
    old = {"version": 1, "id": "old1", "title": "Old", "created": 1.7e9, "updated": 1.7e9, "parent": "abc",
           "messages": [{"role": "user", "content": "hi", "created": 1.7e9},
                        {"role": "assistant", "content": "hello", "created": 1.7e9, "stats": {"generated_tokens": 3}}]}
    (tmp_path / "old1.json").write_text(json.dumps(old))
    bad = {"id": "bad1", "messages": [{"role": "user", "content": "x", "branches": [{"messages": "nope"}]}]}
    (tmp_path / "bad1.json").write_text(json.dumps(bad))
    store = ConversationStore(tmp_path)
    conv = store.get("old1")
    assert texts(conv) == ["hi", "hello"] and conv.parent == "abc"
    assert branches.position(conv.messages[0]) == (0, 1) and conv.messages[0].branches == []
    assert store.get("bad1") is None and "bad1.json" in (store.notice or "")
    assert len(list((tmp_path / "set-aside").glob("bad1*.json"))) == 1  # kept, not lost
    branches.edit(conv, 0, "hi there")
    store.save(conv)
    saved = json.loads((tmp_path / "old1.json").read_text())
    assert saved["messages"][0]["branch"] == 1 and saved["messages"][0]["branches"][0]["messages"][1]["content"] == "hello"


def test_a_failed_edit_leaves_the_conversation_as_it_was(tmp_path):
    store = ConversationStore(tmp_path)
    conv = chat(store, "one", "two")
    branches.edit(conv, 2, "two, b")
    conv.messages.append(StoredMessage("assistant", "re: two, b"))
    branches.switch(conv, 2, 0)
    store.save(conv)
    before = json.loads((tmp_path / f"{conv.id}.json").read_text())["messages"]
    shown = texts(conv)
    made = branches.edit(conv, 2, "two, c")
    store.save(conv)  # the page saves the edit before the model sees it
    gateway = Script([], [0.0], end=ErrorEvent("r1", "worker_crashed", "Worker w0 stopped.", True))
    reply = Reply(gateway, store, conv, SamplingParams(max_tokens=8), edit=made)
    run(reply.run())
    assert reply.undone is not None and reply.undone.content == "two, c"
    assert texts(conv) == shown and branches.position(conv.messages[2]) == (0, 2)
    assert json.loads((tmp_path / f"{conv.id}.json").read_text())["messages"] == before
    assert texts(ConversationStore(tmp_path).get(conv.id)) == shown
