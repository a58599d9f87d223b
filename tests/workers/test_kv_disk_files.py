"""The snapshot folder as files: names, budget, clearing, deleted conversations, leftovers."""

from __future__ import annotations

import os
import time

import pytest

from desktop.workers.kv_disk.files import SnapshotDir


def put(folder: SnapshotDir, conv: str, key: str, size: int, used: float) -> os.PathLike:
    path = folder.path_for(conv, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    folder.touch(path, used)
    return path


def test_names_carry_the_conversation_and_refuse_what_could_shape_a_path(tmp_path):
    folder = SnapshotDir(tmp_path)
    assert folder.path_for("abc123", "ff").name == "abc123--ff.kvsnap"
    assert folder.path_for("", "ff").name == "_--ff.kvsnap"
    assert folder.path_for("../../etc", "ff").name == "_--ff.kvsnap"
    with pytest.raises(ValueError):
        folder.path_for("abc", "../x")


def test_trim_removes_least_recently_used_first_and_keeps_the_new_one(tmp_path):
    folder = SnapshotDir(tmp_path)
    now = time.time()
    old = put(folder, "a", "01", 100, now - 30)
    mid = put(folder, "b", "02", 100, now - 20)
    new = put(folder, "c", "03", 100, now - 40)  # the oldest use, but just written: kept
    assert folder.trim(200, keep=new) == 1
    assert not old.exists() and mid.exists() and new.exists()
    assert folder.used_bytes() == 200
    assert folder.trim(50, keep=new) == 2  # alone over the budget: it goes too
    assert folder.entries() == []


def test_delete_collect_and_clear(tmp_path):
    folder = SnapshotDir(tmp_path)
    now = time.time()
    a = put(folder, "conv1", "0a", 10, now)
    b = put(folder, "conv2", "0b", 10, now)
    api = put(folder, "", "0c", 10, now)
    torn = tmp_path / ".conv1--0d.kvsnap.999999999-abc.tmp"  # a write cut short by kill -9
    torn.write_bytes(b"half")
    os.utime(torn, (now - 60, now - 60))
    assert folder.delete_conversation("conv1") == 1 and not a.exists()
    assert folder.delete_conversation("_") == 0 and api.exists()
    assert folder.collect(keep=["conv9"]) == 1  # conv2 no longer exists; the API's stays
    assert not b.exists() and api.exists() and not torn.exists()
    assert [e.conversation for e in folder.entries()] == ["_"]
    assert folder.clear() == 1 and folder.used_bytes() == 0


def test_a_missing_folder_is_empty(tmp_path):
    folder = SnapshotDir(tmp_path / "none")
    assert folder.entries() == [] and folder.used_bytes() == 0 and folder.clear() == 0
