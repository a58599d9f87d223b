"""Reading ahead at a worker's start (kv_disk/prefetch.py): the most recently used snapshots,
within a bound, brought into the OS page cache, so the first restore reads memory."""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
import sys
from pathlib import Path

import pytest
from worker_helpers import S, U, chat

from desktop.workers.config import WorkerConfig
from desktop.workers.kv_disk import prefetch
from desktop.workers.kv_disk.files import Entry, SnapshotDir
from desktop.workers.local import LocalClient


def entry(tmp_path: Path, name: str, size: int, used: float) -> Entry:
    path = tmp_path / f"c--{name}.kvsnap"
    path.write_bytes(os.urandom(size))
    os.utime(path, (used, used))
    return Entry(path, "c", name, size, used)


def test_the_newest_snapshots_within_the_bound_newest_first(tmp_path):
    old, mid, new = entry(tmp_path, "a1", 300, 1.0), entry(tmp_path, "b2", 300, 2.0), entry(tmp_path, "c3", 300, 3.0)
    assert prefetch.newest([old, mid, new], 700) == [new.path, mid.path]
    assert prefetch.newest([old, mid, new], 100) == [new.path]  # the newest always, even past the bound
    assert prefetch.newest([], 100) == []
    assert [e.path for e in SnapshotDir(tmp_path).entries()] == [old.path, mid.path, new.path]


def test_read_ahead_reads_each_file_and_skips_one_gone(tmp_path, monkeypatch):
    a = entry(tmp_path, "a1", 3 << 20, 1.0)
    opened = []
    real_open = open
    monkeypatch.setattr("builtins.open", lambda p, *a, **k: opened.append(Path(p)) or real_open(p, *a, **k))
    prefetch.read_ahead([tmp_path / "gone.kvsnap", a.path])
    assert opened == [tmp_path / "gone.kvsnap", a.path]


def _resident_pages(path: Path) -> tuple[int, int]:
    """(pages of `path` in the OS page cache, pages in all), by mincore over a mapping."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    size = path.stat().st_size
    pages = -(-size // mmap.PAGESIZE)
    vec = (ctypes.c_ubyte * pages)()
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr is None or addr == ctypes.c_void_p(-1).value:
            pytest.skip("mmap failed")
        try:
            if libc.mincore(ctypes.c_void_p(addr), size, vec) != 0:
                pytest.skip("mincore failed")
        finally:
            libc.munmap(ctypes.c_void_p(addr), size)
    finally:
        os.close(fd)
    return sum(v & 1 for v in vec), pages


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mincore and posix_fadvise(DONTNEED) as on Linux")
def test_a_snapshot_dropped_from_the_page_cache_is_read_back_into_it(tmp_path):
    a = entry(tmp_path, "a1", 24 << 20, 1.0)  # past the few MB a WILLNEED reads
    fd = os.open(a.path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    resident, pages = _resident_pages(a.path)
    if resident > pages // 4:
        pytest.skip("this file system keeps the file in memory (tmpfs?)")
    prefetch.start([a.path]).join(10)
    resident, pages = _resident_pages(a.path)
    assert resident == pages


def test_a_worker_reads_its_newest_snapshots_ahead_at_start(tiny_lm, tmp_path, monkeypatch):
    first = LocalClient(tiny_lm, WorkerConfig(num_slots=2, cache_min_tokens=4, kv_dir=str(tmp_path), runner="static"))
    chat(first, "a", [S, U("Tell me about the sea, please.")])
    first.worker.close()
    files = [e.path for e in SnapshotDir(tmp_path).entries()]
    assert len(files) == 1
    asked = []
    monkeypatch.setattr(prefetch, "start", asked.append)
    LocalClient(tiny_lm, WorkerConfig(num_slots=2, cache_min_tokens=4, kv_dir=str(tmp_path), runner="static"))
    assert asked == [files]
