"""The llama.cpp helper's lifetime (no model needed: its wait, in a child process): started by hand
in the background (stdin /dev/null) it keeps serving until SIGTERM or Ctrl-C; under a parent that
pipes its stdin (LlamaServer) it ends when that pipe closes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ("from desktop.workers.remote.llama_server import wait_for_end; "
          "print('serving', flush=True); wait_for_end(); print('ended', flush=True)")


def start(stdin) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT], stdin=stdin, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    assert proc.stdout is not None and proc.stdout.readline() == "serving\n", proc.stderr.read()  # type: ignore[union-attr]
    return proc


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_in_the_background_it_serves_until_a_signal(sig):
    proc = start(subprocess.DEVNULL)  # what `&` in a script and nohup give it
    try:
        time.sleep(0.8)
        assert proc.poll() is None  # still serving: an empty stdin does not end it
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 0 and out == "ended\n", err


def test_under_a_parent_it_ends_when_the_pipe_closes():
    proc = start(subprocess.PIPE)
    try:
        time.sleep(0.3)
        assert proc.poll() is None
        proc.stdin.close()  # type: ignore[union-attr]
        assert proc.wait(10) == 0 and proc.stdout.read() == "ended\n"  # type: ignore[union-attr]
    finally:
        proc.kill()


@pytest.mark.real_model
def test_the_real_helper_started_with_no_stdin_keeps_serving():
    import json

    import httpx

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "desktop.workers.remote.llama_server", "--ctx", "256", "--slots", "1"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            cwd=ROOT, env=env)
    try:
        url = json.loads(proc.stdout.readline())["url"]  # type: ignore[union-attr]
        time.sleep(1.0)
        assert proc.poll() is None
        assert httpx.get(url + "/health", timeout=10, trust_env=False).status_code == 200
        proc.terminate()
        assert proc.wait(20) == 0
    finally:
        proc.kill()
