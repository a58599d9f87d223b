"""Issue 8, item 12: one Omnidesk per user. A second launch brings the first window to the front and
exits 0; a lock or socket left by a killed instance does not stop the next start."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from PySide6.QtWidgets import QMainWindow

from desktop.settings import Settings, save_settings
from desktop.ui.single_instance import LOCK_NAME, SingleInstance, second_launch, server_name

pytestmark = pytest.mark.hardening
ROOT = Path(__file__).resolve().parents[2]


def test_a_second_instance_raises_the_first(tmp_path, qtbot):
    window = QMainWindow()
    qtbot.addWidget(window)
    window.showMinimized()
    first, second = SingleInstance(tmp_path), SingleInstance(tmp_path)
    assert first.acquire()
    first.listen(lambda: window)
    try:
        assert not second.acquire()
        result: list[int] = []
        asker = threading.Thread(target=lambda: result.append(second_launch(second)))  # it blocks
        with qtbot.waitSignal(first.activated, timeout=5000):
            asker.start()
        qtbot.waitUntil(lambda: result == [0], timeout=5000)
        assert not window.isMinimized() and window.isVisible()
    finally:
        asker.join(5)
        first.release()
    assert SingleInstance(tmp_path).acquire()  # released: the next launch runs


def test_other_folders_and_users_are_other_instances(tmp_path):
    a, b = SingleInstance(tmp_path / "a"), SingleInstance(tmp_path / "b")
    try:
        assert a.acquire() and b.acquire()
        assert server_name(tmp_path / "a") != server_name(tmp_path / "b")
    finally:
        a.release()
        b.release()


def test_a_killed_instance_leaves_nothing_that_blocks_the_next(tmp_path, qtbot):
    code = ("import sys, os; from PySide6.QtCore import QCoreApplication; app = QCoreApplication([]);"
            "from desktop.ui.single_instance import SingleInstance;"
            f"s = SingleInstance({str(tmp_path)!r}); assert s.acquire(); s.listen(lambda: None);"
            "print('ready', flush=True); os.kill(os.getpid(), 9)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "ready" and proc.returncode == -signal.SIGKILL
    assert (tmp_path / LOCK_NAME).exists()  # the dead one's lock (and socket) are still there
    start = time.monotonic()
    again = SingleInstance(tmp_path)
    try:
        assert again.acquire()  # its process is gone: the lock is stale
        again.listen(lambda: None)
        assert time.monotonic() - start < 2.0
        later = SingleInstance(tmp_path)
        assert not later.acquire()
        asker = threading.Thread(target=later.hand_over)
        with qtbot.waitSignal(again.activated, timeout=5000):
            asker.start()
        asker.join(5)
    finally:
        again.release()


@pytest.mark.slow  # two real app starts (about 10 s)
@pytest.mark.timeout(120)
def test_a_second_launch_of_the_app_raises_the_first_and_exits_0(tmp_path):
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(ROOT)}
    for name in ("CONFIG", "DATA", "LOG"):
        env[f"OMNIDESK_{name}_DIR"] = str(tmp_path / name.lower())
    save_settings(Settings(model_source="tiny"), tmp_path / "config" / "settings.json")
    launch = [sys.executable, "-m", "desktop"]
    first = subprocess.Popen(launch, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log = tmp_path / "log" / "omnidesk.log"
    try:
        deadline = time.monotonic() + 60
        while "Model omnidesk-tiny ready" not in read(log):
            assert first.poll() is None, first.communicate()[0]
            assert time.monotonic() < deadline, read(log)
            time.sleep(0.2)
        start = time.monotonic()
        second = subprocess.run(launch, cwd=ROOT, env=env, capture_output=True, text=True, timeout=30)
        assert second.returncode == 0, second.stderr
        assert "already running" in second.stderr
        assert time.monotonic() - start < 20
        deadline = time.monotonic() + 10
        while "Another launch asked for this window" not in read(log):
            assert time.monotonic() < deadline, read(log)
            time.sleep(0.1)
        assert first.poll() is None  # the first one goes on
    finally:
        first.send_signal(signal.SIGINT)
        try:
            first.wait(30)
        except subprocess.TimeoutExpired:
            first.kill()
            first.wait()
    assert first.returncode == 0


def read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
