"""The terminal chat's commands (issue 8, item 15): /stats prints a readable, rounded summary, and
an unknown /command is answered, never sent to the model; // sends a message that starts with /."""

from __future__ import annotations

import io
import re

import pytest

from desktop import cli

pytestmark = pytest.mark.hardening


def chat(monkeypatch, capsys, lines: list[str]) -> tuple[str, str]:
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(line + "\n" for line in lines)))
    assert cli.main(["chat", "--model", "tiny", "--max-tokens", "4", "--threads", "1"]) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


def test_stats_is_readable_and_unknown_commands_are_not_sent(monkeypatch, capsys):
    out, err = chat(monkeypatch, capsys, ["Hello there", "/bogus", "/Stats", "/stats please", "/help", "/quit"])
    assert "Unknown command /bogus — try /help" in out
    stats = out[out.index("Requests:"):]
    assert stats.startswith("Requests: 1\n")  # /bogus never reached the model
    assert "{" not in out and "'" not in stats  # not a raw dict
    assert not re.search(r"\d\.\d{2,}", stats), stats  # rounded
    assert re.search(r"Cache hits: \d+% of [\d,]+ history tokens reused", stats) and re.search(r"median \d+ ms", stats)
    assert "Why: new conversation 1" in stats  # the badges' words (issue 19)
    assert "/stats" in out[out.index("Commands:"):] and "/help" in out[out.index("Commands:"):]


def test_double_slash_and_paths_are_messages(monkeypatch, capsys):
    out, _ = chat(monkeypatch, capsys, ["//bogus is not a command", "/usr/lib holds libraries", "/stats", "/exit"])
    assert "Unknown command" not in out
    assert "Requests: 2\n" in out


def test_stats_text_rounds_everything():
    snap = {"requests": 3, "errors": 1, "cache_hit_rate": 0.6666666666666666, "tokens_saved": 1234,
            "history_tokens": 3000, "reused_history_tokens": 2000,
            "input_tokens": 5000, "generated_tokens": 77, "ttft_p50_ms": 85.123456789, "ttft_p95_ms": 210.98765}
    assert cli.stats_text(snap) == ("Requests: 3 (1 failed)\nCache hits: 67% of 3,000 history tokens reused\n"
                                    "Prompt tokens: 5,000 in all, 1,234 from the cache (25%)\nReply tokens: 77\n"
                                    "Time to first token: median 85 ms, 95th percentile 211 ms")
    assert cli.stats_text({"requests": 0}) == "Requests: 0"
    assert [cli.command_of(x) for x in ("/stats", "/Regen now", "//x", "/usr/bin", "hello /x", "/")] == \
        ["/stats", "/regen", None, None, None, "/"]


def test_the_terminal_chat_samples_as_the_app_does_unless_told(tmp_path):
    """/regen must be able to give another reply: the terminal chat takes the app's sampling
    settings (temperature 0.6 by default), and --temperature / --max-tokens override them."""
    from desktop.settings import Settings

    saved = Settings(temperature=0.9, max_tokens=300).sampling()
    params = cli.chat_params(cli.parse_args(["chat"]), saved)
    assert (params.temperature, params.max_tokens, params.top_p) == (0.9, 300, saved.top_p)
    params = cli.chat_params(cli.parse_args(["chat", "--temperature", "0", "--max-tokens", "8"]), saved)
    assert (params.temperature, params.max_tokens, params.top_p) == (0.0, 8, saved.top_p)
    assert cli.chat_params(cli.parse_args(["chat"]), Settings().sampling()).temperature == 0.6


def test_the_terminal_chat_uses_the_windows_preset_prompt(tmp_path):
    """As the window's new chats: the preset chosen in Settings (Assistant by default); --system wins."""
    from desktop.chat.presets import PresetStore

    presets = PresetStore(tmp_path)
    assistant = presets.get("assistant")
    assert assistant is not None
    args = cli.parse_args(["chat"])
    assert cli.system_prompt(args, "assistant", presets) == assistant.prompt
    mine = presets.add("Pirate", "Answer as a pirate.")
    assert cli.system_prompt(args, mine.id, presets) == "Answer as a pirate."
    assert cli.system_prompt(args, "user-deleted", presets) == presets.list()[0].prompt
    assert cli.system_prompt(cli.parse_args(["chat", "--system", ""]), mine.id, presets) == ""
    assert cli.system_prompt(cli.parse_args(["chat", "--system", "Be brief."]), mine.id, presets) == "Be brief."


def test_the_terminal_chat_sends_the_chosen_preset(monkeypatch, capsys, tmp_path):
    from desktop.chat.presets import PresetStore
    from desktop.settings import Settings, save_settings
    from desktop.workers.local import LocalClient

    monkeypatch.setenv("OMNIDESK_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("OMNIDESK_DATA_DIR", str(tmp_path / "data"))
    mine = PresetStore().add("Terse", "Reply in one word.")
    save_settings(Settings(model_source="tiny", system_preset=mine.id))
    sent = []
    real = LocalClient.stream
    monkeypatch.setattr(LocalClient, "stream", lambda self, cmd, rid=None: (sent.append(cmd), real(self, cmd, rid))[1])
    chat(monkeypatch, capsys, ["Hello", "/quit"])
    assert sent and sent[0].messages[0].role == "system" and sent[0].messages[0].content == "Reply in one word."


def test_progress_into_a_pipe_is_one_plain_line_per_stage():
    into_pipe = io.StringIO()
    progress = cli.Progress(into_pipe)
    for stage, fraction in (("Loading tokenizer", None), ("Loading model", 0.1), ("Loading model", 0.7), ("Ready", 1.0)):
        progress(stage, fraction)
    assert into_pipe.getvalue() == "Loading tokenizer\nLoading model\nReady\n"


def test_progress_on_a_terminal_rewrites_its_line():
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Tty()
    progress = cli.Progress(tty)
    progress("Loading model", 0.5)
    progress("Ready", 1.0)
    assert tty.getvalue() == "\r\033[KLoading model 50%\r\033[KReady 100%\n"
