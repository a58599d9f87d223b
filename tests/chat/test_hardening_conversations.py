"""Issue 8 faults replayed on the conversation store: one bad file (a null field, nested JSON, a huge
file) is set aside with a notice and the others load; bad metadata never breaks a page later."""

from __future__ import annotations

import json
import os
import time

import pytest

from desktop.chat.conversations import ConversationStore, StoredMessage
from desktop.chat.export import stats_line, to_json, to_markdown

pytestmark = pytest.mark.hardening


def good_one(store: ConversationStore):
    conv = store.new("Be brief.")
    conv.messages += [StoredMessage("user", "hello"), StoredMessage("assistant", "hi", {"input_tokens": 3})]
    store.save(conv)
    return conv


def saved(root, conv_id: str, **fields) -> dict:
    data = {"version": 1, "id": conv_id, "title": "t", "created": 1_700_000_000.0, "updated": 1_700_000_100.0,
            "system_prompt": "", "preset": "", "parent": None,
            "messages": [{"role": "user", "content": "q", "stats": None, "created": 1_700_000_000.0, "images": []}]}
    data.update(fields)
    (root / f"{conv_id}.json").write_text(json.dumps(data), encoding="utf-8")
    return data


def test_a_null_created_does_not_hide_the_other_conversations(tmp_path):
    good = good_one(ConversationStore(tmp_path))
    saved(tmp_path, "nullcreated", created=None, updated=None)
    store = ConversationStore(tmp_path)  # raised TypeError before: the page showed "Chat is unavailable"
    assert {c.id for c in store.list()} == {good.id, "nullcreated"}
    conv = store.get("nullcreated")
    assert isinstance(conv.created, float) and conv.created > 0  # the file's time stands in
    assert to_markdown(conv) and store.search("t")


@pytest.mark.parametrize("fields", [
    {"title": 5, "preset": ["x"], "parent": {"a": 1}, "created": "yesterday", "updated": float("inf")},
    {"created": True, "updated": -5, "title": None},
    {"created": 1e300, "updated": 1e308},
    {"messages": [{"role": "assistant", "content": "a", "created": "now", "images": "x",
                   "stats": {"input_tokens": "abc", "cached_tokens": 2**80, "ttft_ms": None,
                             "decode_ms": "fast", "kind": 7, "nested": {"a": [1]}, "generated_tokens": 5}}]},
    {"messages": [{"role": "user", "content": "lone \udfff surrogate", "images": [3, "", "a\0b", "ok.png"]}],
     "title": "\ud800"},
])
def test_bad_metadata_falls_back_and_cannot_break_the_page_later(tmp_path, fields):
    saved(tmp_path, "meta", **fields)
    store = ConversationStore(tmp_path)
    conv = store.get("meta")
    assert conv is not None and store.notice is None
    for ts in [conv.created, conv.updated, *(m.created for m in conv.messages)]:
        assert isinstance(ts, float) and 0 < ts < 253_402_300_800
        time.localtime(ts)  # what the list's dates and the export call
    assert isinstance(conv.title, str) and isinstance(conv.preset, str) and conv.parent is None
    for m in conv.messages:
        assert all(isinstance(p, str) and p and "\0" not in p for p in m.images)
        stats_line(m.stats)  # the badge: raised on "abc" or 2**80 floats before
        m.content.encode("utf-8")
    to_markdown(conv), to_json(conv)
    store.save(conv)  # and it saves: a lone surrogate raised UnicodeEncodeError before
    assert ConversationStore(tmp_path).get("meta").messages[0].content == conv.messages[0].content


@pytest.mark.parametrize("content,reason", [
    ('{"id": "nest", "messages": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
    ("{broken", "not valid JSON"),
    (json.dumps({"id": "roles", "messages": [{"role": "wizard", "content": "x"}]}), "message 1"),
    (json.dumps({"id": "sys", "system_prompt": 42, "messages": []}), "system prompt"),
    (b"\xff\xfe{}", "not UTF-8"),
])
def test_an_unreadable_file_is_set_aside_with_a_notice(tmp_path, content, reason):
    good = good_one(ConversationStore(tmp_path))
    bad = tmp_path / "bad.json"
    bad.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    store = ConversationStore(tmp_path)
    assert [c.id for c in store.list()] == [good.id]
    assert store.notice and "bad.json" in store.notice and reason in store.notice
    assert str(tmp_path / "set-aside") in store.notice
    (kept,) = store.skipped
    assert kept.parent == tmp_path / "set-aside" and not bad.exists()
    assert kept.read_bytes() == bad_bytes(content)  # moved, never deleted


def bad_bytes(content) -> bytes:
    return content if isinstance(content, bytes) else content.encode("utf-8")


def test_a_huge_file_is_set_aside_unread(tmp_path):
    good = good_one(ConversationStore(tmp_path))
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as f:
        f.truncate(100 << 20)  # sparse: the size matters, not the content
    start = time.perf_counter()
    store = ConversationStore(tmp_path)
    assert time.perf_counter() - start < 1.0
    assert [c.id for c in store.list()] == [good.id]
    assert "huge.json" in store.notice and "100 MB" in store.notice and "64 MB limit" in store.notice
    assert store.skipped[0].stat().st_size == 100 << 20


def test_two_bad_files_with_one_name_in_one_second_both_kept(tmp_path):
    for content in ("{one", "{two"):
        (tmp_path / "same.json").write_text(content, encoding="utf-8")
        ConversationStore(tmp_path)
    kept = sorted(p.read_text(encoding="utf-8") for p in (tmp_path / "set-aside").iterdir())
    assert kept == ["{one", "{two"]


def test_a_nested_or_huge_presets_file_is_set_aside_with_a_notice(tmp_path):
    from desktop.chat.presets import PresetStore

    (tmp_path / "presets.json").write_text('{"presets": ' + "[" * 100_000 + "]" * 100_000 + "}")
    presets = PresetStore(tmp_path)
    assert len(presets.list()) == 5 and "nested too deeply" in presets.notice
    with open(tmp_path / "presets.json", "wb") as f:
        f.truncate(100 << 20)
    presets = PresetStore(tmp_path)
    assert len(presets.list()) == 5 and "4 MB limit" in presets.notice
    assert len(list(tmp_path.glob("presets.bad-*.json"))) == 2  # both kept, under their own names


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX only")
def test_a_fifo_or_a_folder_named_like_a_conversation_does_not_block_the_start(tmp_path):
    good = good_one(ConversationStore(tmp_path))
    os.mkfifo(tmp_path / "pipe.json")  # opening it for reading would wait for a writer forever
    (tmp_path / "folder.json").mkdir()
    store = ConversationStore(tmp_path)
    assert [c.id for c in store.list()] == [good.id]
    assert "pipe.json (it is not a regular file)" in store.notice and "folder.json" not in store.notice


def test_an_older_snapshot_written_late_never_replaces_a_newer_save(tmp_path):
    """A reply's last checkpoint is written on a writer thread; the user's next message is saved
    on the Qt thread. Whichever reaches the disk last, the file holds the newer version."""
    import dataclasses

    store = ConversationStore(tmp_path)
    conv = store.new("Be brief.")
    conv.messages += [StoredMessage("user", "Hi"), StoredMessage("assistant", "Hello!")]
    store.save(conv)
    old = dataclasses.replace(conv, messages=list(conv.messages))
    old_stamp = store.stamp(conv.id)  # the reply's checkpoint, taken before the next message
    conv.messages.append(StoredMessage("user", "And then?"))
    store.save(conv)  # the next message, saved at once
    store.write_snapshot(old, old_stamp)  # the checkpoint lands afterwards
    again = ConversationStore(tmp_path).get(conv.id)
    assert [m.content for m in again.messages] == ["Hi", "Hello!", "And then?"]
