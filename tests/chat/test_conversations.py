"""The conversation store, presets and export: persistence, ordering, search, branches, corrupt
files skipped and kept, atomic writes, and what the exported files contain."""

from __future__ import annotations

import json
import logging
import os

import pytest

from desktop.chat import conversations as conv_mod
from desktop.chat import branches
from desktop.chat.conversations import Conversation, ConversationStore, StoredMessage, data_dir, title_from
from desktop.chat.export import export, format_for, stats_line, to_json, to_markdown
from desktop.chat.presets import PresetStore

STATS = {"input_tokens": 450, "cached_tokens": 412, "generated_tokens": 60, "kind": "extend", "miss_reason": "",
         "ttft_ms": 85.2, "decode_ms": 4155.0, "finish_reason": "eos"}


def chat(store: ConversationStore, *texts: str) -> Conversation:
    conv = store.new("Be brief.", "concise")
    for text in texts:
        conv.messages += [StoredMessage("user", text), StoredMessage("assistant", f"re: {text}", dict(STATS))]
    store.save(conv)
    return conv


def test_saved_conversations_come_back_newest_first(tmp_path):
    store = ConversationStore(tmp_path)
    a, b = chat(store, "first"), chat(store, "second")
    a.messages.append(StoredMessage("user", "more"))
    store.save(a)
    assert [c.id for c in store.list()] == [a.id, b.id]
    again = ConversationStore(tmp_path)
    assert [c.id for c in again.list()] == [a.id, b.id]
    loaded = again.get(a.id)
    assert loaded.system_prompt == "Be brief." and loaded.preset == "concise"
    assert [(m.role, m.content) for m in loaded.messages] == [(m.role, m.content) for m in a.messages]
    assert loaded.messages[1].stats == STATS


def test_an_unsaved_new_conversation_is_not_listed(tmp_path):
    store = ConversationStore(tmp_path)
    conv = store.new()
    assert store.list() == [] and conv.id not in store and not list(tmp_path.iterdir())


def test_title_is_the_first_user_message_trimmed():
    assert title_from("  Hello\n  there ") == "Hello there"
    long = title_from("Please explain how the incremental message cache decides which slot to use")
    assert long.endswith("…") and len(long) <= 41 and long.startswith("Please explain how the")
    assert title_from("x" * 100) == "x" * 40 + "…"


def test_rename_delete_and_search(tmp_path):
    store = ConversationStore(tmp_path)
    a, b = chat(store, "Plan a trip to Lisbon"), chat(store, "Python decorators")
    store.rename(a.id, "  Lisbon   holiday ")
    assert ConversationStore(tmp_path).get(a.id).title == "Lisbon holiday"
    with pytest.raises(ValueError):
        store.rename(a.id, "   ")
    assert [c.id for c in store.search("LISBON")] == [a.id]
    assert [c.id for c in store.search("python")] == [b.id]
    assert len(store.search("")) == 2 and store.search("nothing like this") == []
    store.delete(b.id)
    assert not (tmp_path / f"{b.id}.json").exists() and b.id not in ConversationStore(tmp_path)
    store.delete(b.id)  # again: nothing happens


def test_an_edit_branches_inside_the_conversation(tmp_path):
    store = ConversationStore(tmp_path)
    conv = chat(store, "one", "two", "three")
    title = conv.title
    branches.edit(conv, 2, "two, edited")
    store.save(conv)
    assert [m.content for m in conv.messages] == ["one", "re: one", "two, edited"] and conv.title == title
    assert [c.id for c in store.list()] == [conv.id]  # no second conversation
    kept = conv.messages[2].branches[0].messages
    assert [m.content for m in kept] == ["two", "re: two", "three", "re: three"]  # the original is kept
    assert [m.content for m in ConversationStore(tmp_path).get(conv.id).messages] == ["one", "re: one", "two, edited"]
    with pytest.raises(ValueError):
        branches.edit(conv, 1, "not a user message")


def test_a_corrupt_file_is_set_aside_with_a_notice_and_kept(tmp_path, caplog):
    store = ConversationStore(tmp_path)
    good = chat(store, "fine")
    (tmp_path / "broken.json").write_text("{not json", encoding="utf-8")
    (tmp_path / "wrongid.json").write_text(json.dumps(good.to_dict()), encoding="utf-8")
    (tmp_path / "nomsgs.json").write_text(json.dumps({"id": "nomsgs", "messages": 3}), encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        again = ConversationStore(tmp_path)
    assert [c.id for c in again.list()] == [good.id]
    assert {p.name.split(".")[0] for p in again.skipped} == {"broken", "wrongid", "nomsgs"}
    assert all(p.parent == tmp_path / "set-aside" and p.suffix == ".json" for p in again.skipped)
    assert "broken.json" in caplog.text
    assert "3 conversation files could not be read" in again.notice and "broken.json (it is not valid JSON" in again.notice
    assert sorted(p.name for p in tmp_path.glob("*.json")) == [f"{good.id}.json"]
    broken = next(p for p in again.skipped if p.name.startswith("broken."))
    assert broken.read_text(encoding="utf-8") == "{not json"  # moved, never deleted
    assert ConversationStore(tmp_path).notice is None  # said once, not at every start


def test_writes_are_atomic(tmp_path, monkeypatch):
    store = ConversationStore(tmp_path)
    conv = chat(store, "kept")
    before = (tmp_path / f"{conv.id}.json").read_text(encoding="utf-8")

    def crash(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(conv_mod.os, "replace", crash)
    conv.messages.append(StoredMessage("user", "lost"))
    with pytest.raises(OSError):
        store.save(conv)
    monkeypatch.undo()
    assert (tmp_path / f"{conv.id}.json").read_text(encoding="utf-8") == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{conv.id}.json"]  # no temporary file left
    assert len(ConversationStore(tmp_path).get(conv.id).messages) == 2


def test_data_dir_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("OMNIDESK_DATA_DIR", str(tmp_path / "d"))
    assert data_dir() == tmp_path / "d"
    assert ConversationStore.default().root == tmp_path / "d" / "conversations"


# ----------------------------------------------------------------------------- presets


def test_builtin_presets_and_user_presets(tmp_path):
    presets = PresetStore(tmp_path)
    names = [p.name for p in presets.list()]
    assert names[:5] == ["Assistant", "Concise", "Coder", "Tutor", "Translator"]
    assert all(p.builtin and p.prompt for p in presets.list())
    mine = presets.add("Pirate", "Talk like a pirate.")
    assert presets.add("Pirate", "x").id != mine.id
    presets.update(mine.id, prompt="Arr.")
    again = PresetStore(tmp_path)
    assert again.get(mine.id).prompt == "Arr." and not again.get(mine.id).builtin
    again.delete(mine.id)
    assert PresetStore(tmp_path).get(mine.id) is None
    with pytest.raises(ValueError):
        again.update("assistant", prompt="changed")
    with pytest.raises(ValueError):
        again.delete("coder")
    with pytest.raises(ValueError):
        again.add("  ", "no name")


def test_a_corrupt_presets_file_is_kept_aside(tmp_path):
    (tmp_path / "presets.json").write_text("[broken", encoding="utf-8")
    presets = PresetStore(tmp_path)
    assert len(presets.list()) == 5
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("presets.bad-")]


# ----------------------------------------------------------------------------- export


def test_stats_line_names_a_remote_worker_only() -> None:
    assert stats_line({**STATS, "worker": "remote1"}) == "cached 412 / new 38 tokens · TTFT 85 ms · 14.2 tok/s · history cached · remote1"
    assert stats_line({**STATS, "worker": "cpu0"}) == stats_line(STATS)  # this computer: nothing to say


def test_stats_line_says_what_the_cache_did():
    assert stats_line(STATS) == "cached 412 / new 38 tokens · TTFT 85 ms · 14.2 tok/s · history cached"
    miss = {**STATS, "kind": "miss", "miss_reason": "evicted", "cached_tokens": 0}
    assert stats_line(miss).endswith(" · evicted")
    assert stats_line({**STATS, "kind": "prefix", "miss_reason": "edited"}).endswith(" · edited")
    assert stats_line({**STATS, "finish_reason": "stopped"}).endswith("stopped")
    assert stats_line(None) == ""


def test_markdown_and_json_exports(tmp_path):
    store = ConversationStore(tmp_path / "c")
    conv = chat(store, "What is **KV**?")
    md = to_markdown(conv)
    assert md.startswith("# What is **KV**?\n")
    assert "> Be brief." in md and "## You\n\nWhat is **KV**?" in md and "## Assistant\n\nre: What is **KV**?" in md
    assert "<sub>cached 412 / new 38 tokens" in md
    data = json.loads(to_json(conv))
    assert data["format"] == "omnidesk.conversation" and data["version"] == 1
    assert Conversation.from_dict(data).messages[1].stats == STATS
    assert format_for("a.JSON") == "json" and format_for("a.md") == "markdown"
    assert export(conv, tmp_path / "out.json").read_text(encoding="utf-8") == to_json(conv)
    assert export(conv, tmp_path / "out.md").read_text(encoding="utf-8") == md
    assert os.listdir(tmp_path / "c") == [f"{conv.id}.json"]
