"""Issue 22 (app side): deleting a conversation deletes its KV snapshots, and the snapshots of
conversations that no longer exist are collected at start; both off the UI thread."""

from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest

from desktop.chat.conversations import ConversationStore, StoredMessage, data_dir
from desktop.composition import Composition
from desktop.settings import Settings
from desktop.workers.kv_disk.files import SnapshotDir, kv_root


@pytest.fixture
def start(tmp_path, monkeypatch, qapp, aloop):
    for name in ("CONFIG", "DATA", "LOG", "CACHE"):
        monkeypatch.setenv(f"OMNIDESK_{name}_DIR", str(tmp_path / name.lower()))
    made: list[Composition] = []

    def make() -> Composition:
        # no disk tier in the worker (budget 0): it would read the stand-in files, and drop them as torn;
        # the app's housekeeping of the folder runs all the same
        c = Composition(qapp, Settings(model_source="tiny", kv_disk_budget_mb=0), settings_path=tmp_path / "settings.json")
        made.append(c)
        c.start()
        return c

    yield make
    for c in made:
        aloop.run(c.shutdown(), 30)


def _saved(store: ConversationStore, text: str) -> str:
    conv = store.new()
    conv.messages.append(StoredMessage(role="user", content=text))
    store.save(conv)
    return conv.id


def _snapshot(folder: SnapshotDir, conv: str, key: str) -> None:
    folder.root.mkdir(parents=True, exist_ok=True)
    folder.path_for(conv, key).write_bytes(b"kv")


async def _until(check, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.02)


class WatchedDir(SnapshotDir):
    """Notes the thread each chore runs on."""

    def __init__(self, root) -> None:
        super().__init__(root)
        self.threads: dict[str, str] = {}

    def delete_conversation(self, conversation: str) -> int:
        self.threads["delete"] = threading.current_thread().name
        return super().delete_conversation(conversation)

    def collect(self, keep) -> int:
        self.threads["collect"] = threading.current_thread().name
        return super().collect(keep)


def test_snapshots_of_conversations_that_no_longer_exist_are_collected_at_start(start, aloop):
    kept = _saved(ConversationStore(data_dir() / "conversations"), "still here")
    folder = SnapshotDir(kv_root())
    for conv, key in ((kept, "a1"), ("0" * 32, "b2"), ("_", "c3"), ("f" * 32, "d4")):
        _snapshot(folder, conv, key)
    torn = folder.root / f".{'0' * 32}--ab.kvsnap.{2**22 + 7}-x1y2.tmp"  # a write cut short by kill -9
    torn.write_bytes(b"torn")
    os.utime(torn, (time.time() - 3600, time.time() - 3600))
    comp = start()
    assert comp.snapshots.root == kv_root()
    aloop.run(_until(lambda: len(folder.entries()) == 2), 30)

    assert {e.conversation for e in folder.entries()} == {kept, "_"}  # an API client's stays for the budget
    aloop.run(_until(lambda: not torn.exists()))


def test_deleting_a_conversation_deletes_its_snapshots_off_the_ui_thread(start, aloop, monkeypatch):
    comp = start()
    watched = comp.snapshots = WatchedDir(kv_root())
    gone, other = _saved(comp.store, "delete me"), _saved(comp.store, "keep me")
    for conv, key in ((gone, "01"), (gone, "02"), (other, "03")):
        _snapshot(watched, conv, key)
    comp.store.delete(gone)
    aloop.run(_until(lambda: len(watched.entries()) == 1))
    assert watched.entries()[0].conversation == other
    assert watched.threads["delete"] != threading.main_thread().name
    comp.store.delete("no-such-id")  # nothing happens
    assert len(watched.entries()) == 1


def test_the_store_tells_on_delete_of_each_deleted_conversation(tmp_path):
    told: list[str] = []
    store = ConversationStore(tmp_path / "conversations", on_delete=told.append)
    first, second = _saved(store, "one"), _saved(store, "two")
    store.delete(first)
    store.delete(first)  # gone already: nothing to tell
    store.delete("unknown")
    assert told == [first] and second in store and first not in store
