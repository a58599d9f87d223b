"""Issue 8, item 12: two writers (processes or threads) never break a reader nor each other, and the
temporary files a killed writer left behind are cleaned at the next start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from desktop.chat.conversations import ConversationStore
from desktop.settings import load_settings

pytestmark = pytest.mark.hardening
ROOT = Path(__file__).resolve().parents[1]

WRITER = """
import sys, time
from pathlib import Path
from desktop.settings import Settings, save_settings
path, n, k, start = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
errors = []
while time.time() < start:  # both writers start together
    time.sleep(0.001)
for i in range(n):
    try:
        save_settings(Settings(top_k=k, seed=i, window_geometry="g" * 3000), path)
    except Exception as exc:
        errors.append(type(exc).__name__)
print(len(errors), sorted(set(errors)))
"""


def test_two_processes_saving_settings_never_break_each_other_or_a_reader(tmp_path):
    path = tmp_path / "settings.json"
    start = str(time.time() + 1.5)  # after both have imported
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), "400", str(k), start], cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for k in (1, 2)]
    reads = bad = 0
    deadline = time.monotonic() + 60
    while any(w.poll() is None for w in writers) and time.monotonic() < deadline:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            continue  # before the first save
        reads += 1
        try:
            assert json.loads(data)["top_k"] in (1, 2)
        except (ValueError, KeyError, AssertionError):
            bad += 1
    outputs = [w.communicate(timeout=30) for w in writers]
    assert [out.split()[0] for out, _err in outputs] == ["0", "0"], outputs  # no FileNotFoundError
    assert reads > 0 and bad == 0, f"{bad} of {reads} reads were not valid settings"
    assert load_settings(path)[1] is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["settings.json"]  # no temporary file left


def test_threads_saving_one_conversation_never_break_a_reader(tmp_path):
    store = ConversationStore(tmp_path)
    conv = store.new()
    store.save(conv)
    path, errors, bad, stop = tmp_path / f"{conv.id}.json", [], [], threading.Event()

    def write(n: int) -> None:
        for i in range(n):
            try:
                conv.title = f"title {i}"
                store.save(conv)
            except Exception as exc:  # noqa: BLE001
                errors.append(exc)

    def read() -> None:
        while not stop.is_set():
            try:
                json.loads(path.read_bytes())
            except ValueError as exc:
                bad.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    threads = [threading.Thread(target=write, args=(100,)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    stop.set()
    reader.join(10)
    assert errors == [] and bad == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def aged(path: Path, seconds: float, size: int = 1000) -> Path:
    path.write_bytes(b"x" * size)
    then = time.time() - seconds
    os.utime(path, (then, then))
    return path


def test_leftover_temporary_files_are_cleaned_at_start(tmp_path):
    convs, config = tmp_path / "conversations", tmp_path / "config"
    convs.mkdir()
    config.mkdir()
    gone = [
        aged(convs / f".abc.json.{dead_pid()}-k2j3h4g5.tmp", 30),  # its writer was killed (kill -9)
        aged(convs / ".abc.json.1-a1b2c3d4.tmp", 20 * 60),  # a live pid, but far too old for a write
        aged(convs / ".abc.json.q9w8e7r6.tmp", 20 * 60),  # the names earlier versions used
        aged(config / "settings.json.tmp", 20 * 60),
        aged(config / f".settings.json.{dead_pid()}-zz99yy88.tmp", 90),
    ]
    kept = [
        aged(convs / f".abc.json.{os.getpid()}-m1n2b3v4.tmp", 5),  # being written right now
        aged(convs / f".abc.json.{dead_pid()}-p0o9i8u7.tmp", 5),  # too recent to judge
        aged(convs / "notes.tmp", 3600),  # not ours
        aged(config / "other.tmp", 3600),
    ]
    ConversationStore(convs)
    load_settings(config / "settings.json")
    assert [p.name for p in gone if p.exists()] == []
    assert [p.name for p in kept if not p.exists()] == []


def test_a_file_streamed_by_a_writer_function_is_atomic_too(tmp_path):
    """write_atomic(path, fill): `fill` writes the temporary file by name (a library that streams a
    large file); the old file stays whole until the rename, and a fill that fails leaves it, and
    no temporary file, behind."""
    from desktop.safefile import write_atomic

    target = tmp_path / "snap.bin"
    target.write_bytes(b"old")
    os.chmod(target, 0o640)
    seen = []

    def fill(tmp: str) -> None:
        seen.append(target.read_bytes())  # the old file, whole, while the new one is written
        Path(tmp).write_bytes(b"new " * 1000)

    write_atomic(target, fill)
    assert target.read_bytes() == b"new " * 1000 and seen == [b"old"]
    assert os.stat(target).st_mode & 0o777 == 0o640

    def broken(tmp: str) -> None:
        Path(tmp).write_bytes(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomic(target, broken)
    assert target.read_bytes() == b"new " * 1000
    assert [p.name for p in tmp_path.iterdir()] == ["snap.bin"]
