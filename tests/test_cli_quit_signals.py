"""Issue 22: SIGTERM and SIGHUP end the terminal chat as /quit does: the conversation is saved
(a reply being written is stopped and kept), the worker's Shutdown runs (so the KV it holds is
written to disk), the exit status is 0, and the handlers are put back afterwards."""

from __future__ import annotations

import builtins
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from desktop import cli
from desktop.chat.conversations import ConversationStore
from desktop.cli_signals import quit_signals
from desktop.protocol import ChunkEvent, Shutdown
from desktop.workers.local import LocalClient

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGTERM") or os.name == "nt", reason="POSIX signals")
ROOT = Path(__file__).resolve().parents[1]
ARGS = ["chat", "--model", "tiny", "--max-tokens", "24", "--threads", "1"]


@pytest.fixture(autouse=True)
def own_dirs(monkeypatch, tmp_path):
    for name in ("DATA", "CACHE"):
        monkeypatch.setenv(f"OMNIDESK_{name}_DIR", str(tmp_path / name.lower()))


@pytest.fixture
def submitted(monkeypatch) -> list:
    seen: list = []
    real = LocalClient.submit
    monkeypatch.setattr(LocalClient, "submit", lambda self, cmd: (seen.append(cmd), real(self, cmd))[1])
    return seen


def typed(monkeypatch, lines: list[str], then) -> list[str]:
    """The user types `lines`; at the next prompt `then()` runs (a signal arrives)."""
    left, asked = iter(lines), []

    def fake_input(prompt: str = "") -> str:
        asked.append(prompt)
        line = next(left, None)
        if line is None:
            then()
            raise AssertionError("the chat went on reading after the signal")
        return line
    monkeypatch.setattr(builtins, "input", fake_input)
    return asked


@pytest.mark.parametrize("signum", quit_signals(), ids=lambda s: s.name)
def test_a_quit_signal_at_the_prompt_leaves_as_quit_does(monkeypatch, capsys, submitted, signum):
    before = {s: signal.getsignal(s) for s in quit_signals()}
    typed(monkeypatch, ["Hello there"], lambda: os.kill(os.getpid(), signum))
    assert cli.main(ARGS) == 0
    (conv,) = ConversationStore.default().list()
    assert [m.role for m in conv.messages] == ["user", "assistant"] and conv.messages[1].content
    assert any(isinstance(c, Shutdown) for c in submitted)  # the worker's Shutdown ran
    assert "Saved as “Hello there”" in capsys.readouterr().err
    assert {s: signal.getsignal(s) for s in quit_signals()} == before


def test_sigterm_during_a_reply_stops_it_keeps_it_and_leaves(monkeypatch, capsys, submitted):
    real = LocalClient.stream
    killed: list[bool] = []

    def stream(self, cmd, rid=None):
        for event in real(self, cmd, rid):
            yield event
            if isinstance(event, ChunkEvent) and not killed:
                killed.append(True)
                os.kill(os.getpid(), signal.SIGTERM)  # lands mid-reply

    monkeypatch.setattr(LocalClient, "stream", stream)
    typed(monkeypatch, ["Tell me a long story", "Never read"], lambda: None)
    assert cli.main(ARGS) == 0
    (conv,) = ConversationStore.default().list()
    assert [m.role for m in conv.messages] == ["user", "assistant"]
    assert conv.messages[1].stats["finish_reason"] in ("stopped", "cancelled")
    assert isinstance(submitted[-1], Shutdown)
    assert "Saved as" in capsys.readouterr().err


@pytest.mark.timeout(240)
def test_sigterm_ends_a_real_terminal_chat_waiting_at_its_prompt(tmp_path):
    """The process as a logout finds it: blocked reading the next line (not at a Python step)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMNIDESK_")}
    env.update({f"OMNIDESK_{n}_DIR": str(tmp_path / n.lower()) for n in ("CONFIG", "DATA", "LOG", "CACHE")},
               HF_HUB_OFFLINE="1")
    errors = tmp_path / "chat.stderr"
    with errors.open("wb") as err:
        chat = subprocess.Popen([sys.executable, "-m", "desktop", *ARGS[:-4], "--max-tokens", "4", "--threads", "1"],
                                cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err)
    try:
        chat.stdin.write(b"Hello there\n")
        chat.stdin.flush()  # and the pipe stays open: the chat waits for the next line
        deadline = time.monotonic() + 120
        while "cached" not in errors.read_text(errors="replace"):
            assert chat.poll() is None and time.monotonic() < deadline, errors.read_text(errors="replace")
            time.sleep(0.2)
        time.sleep(0.5)  # back at the prompt
        chat.send_signal(signal.SIGTERM)
        assert chat.wait(30) == 0, errors.read_text(errors="replace")
    finally:
        if chat.poll() is None:
            chat.kill()
            chat.wait(10)
        chat.stdin.close()
    assert "Saved as “Hello there”" in errors.read_text(errors="replace")
