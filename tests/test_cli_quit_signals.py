"""Issue 22: SIGTERM and SIGHUP end the terminal chat as /quit does: the conversation is saved
(a reply being written is stopped and kept), the worker's Shutdown runs (so the KV it holds is
written to disk), the exit status is 0, and the handlers are put back afterwards."""

from __future__ import annotations

import builtins
import os
import signal

import pytest

from desktop import cli
from desktop.chat.conversations import ConversationStore
from desktop.cli_signals import quit_signals
from desktop.protocol import ChunkEvent, Shutdown
from desktop.workers.local import LocalClient

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGTERM") or os.name == "nt", reason="POSIX signals")
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
