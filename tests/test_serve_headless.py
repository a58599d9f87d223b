"""`omnidesk serve` as a user runs it: a real process on 127.0.0.1 with the tiny test model; it
says where it listens and when the model is ready, answers a completion (the openai client) and
/metrics, and SIGTERM or SIGINT stops it cleanly (exit 0, the workers shut down) within seconds.
Also: its overrides follow the settings' rules, a taken port is a sentence, and it loads no Qt."""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[1]
READY_S = 180  # a cold start imports torch and transformers; 2 loaded cores are slow
STOP_S = 15


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    """The server process, its output lines read on a thread (never blocking the test)."""

    def __init__(self, tmp: Path, *args: str) -> None:
        env = {**os.environ, "OMNIDESK_CONFIG_DIR": str(tmp / "config"), "OMNIDESK_LOG_DIR": str(tmp / "logs"),
               "OMNIDESK_CACHE_DIR": str(tmp / "cache"), "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
        env.pop("QT_QPA_PLATFORM", None)
        self.proc = subprocess.Popen([sys.executable, "-m", "desktop", "serve", *args], cwd=ROOT, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def wait_for(self, pattern: str, timeout: float) -> re.Match:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                if self.proc.poll() is not None and self.lines.empty():
                    break
                continue
            self.seen.append(line)
            if found := re.search(pattern, line):
                return found
        raise AssertionError(f"no line matching {pattern!r}; output so far:\n" + "\n".join(self.seen))

    def rest(self) -> str:
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return "\n".join(self.seen)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def server(tmp_path):
    made: list[Served] = []
    yield lambda *args: made.append(Served(tmp_path, *args)) or made[-1]
    for s in made:
        s.kill()


@pytest.mark.slow
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT])
def test_serve_answers_then_stops_cleanly_on_a_signal(server, how):
    from openai import OpenAI

    s = server("--model", "tiny", "--host", "127.0.0.1", "--port", str(free_port()))
    url = s.wait_for(r"Listening on (http://127\.0\.0\.1:\d+)", READY_S).group(1)
    s.wait_for(r"^Ready: omnidesk-tiny", READY_S)
    client = OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=60)
    assert [m.id for m in client.models.list()] == ["omnidesk-tiny"]
    done = client.completions.create(model="tiny", prompt="Once upon a time", max_tokens=4, temperature=0)
    assert done.choices[0].text and done.usage.completion_tokens > 0
    metrics = httpx.get(url + "/metrics", timeout=30).text
    assert "omnidesk" in metrics
    streaming, ended = threading.Event(), []  # a long reply still running when the signal comes

    def long_reply() -> None:
        try:
            for _ in client.completions.create(prompt="Once upon a time", max_tokens=1000, stream=True):
                streaming.set()
            ended.append("done")
        except Exception as exc:  # noqa: BLE001 - cut off by the stop: what matters is that it ends
            ended.append(type(exc).__name__)
        streaming.set()

    runner = threading.Thread(target=long_reply, daemon=True)
    runner.start()
    assert streaming.wait(60)
    started = time.monotonic()
    s.proc.send_signal(how)
    assert s.proc.wait(STOP_S) == 0, s.rest()
    assert time.monotonic() - started < STOP_S
    out = s.rest()
    assert "Stopped." in out and "Traceback" not in out, out
    runner.join(5)
    assert ended, "the running reply never ended"
    with pytest.raises(httpx.ConnectError):
        httpx.get(url + "/health", timeout=2)


@pytest.mark.slow
def test_a_taken_port_is_a_sentence_and_exit_2(server):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        s = server("--model", "tiny", "--port", str(port))
        assert s.proc.wait(READY_S) == 2
    out = s.rest()
    assert f"Port {port} is in use" in out and "Traceback" not in out, out


def test_overrides_follow_the_settings_rules():
    from desktop.serve import SettingsError, serve_settings
    from desktop.settings import Settings

    s = serve_settings(Settings(), host="127.0.0.1", port=9001, model="tiny")
    assert (s.api_host, s.api_port, s.model_source, s.api_server_enabled) == ("127.0.0.1", 9001, "tiny", True)
    assert serve_settings(Settings(api_port=8800)).api_port == 8800  # no override: the settings'
    with pytest.raises(SettingsError, match="--host: needs an API key"):
        serve_settings(Settings(), host="0.0.0.0")
    assert serve_settings(Settings(), host="0.0.0.0", key="sk-long-enough-key-123").api_host == "0.0.0.0"
    with pytest.raises(SettingsError, match="--port"):
        serve_settings(Settings(), port=80)


def test_serve_loads_no_qt():
    code = ("import sys, desktop.cli, desktop.serve; from desktop.cli import parse_args; parse_args(['serve']); "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('PySide6', 'shiboken6', 'qasync')); "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=120)
