"""Command line: `omnidesk` opens the desktop window (the terminal chat when there is no display);
`omnidesk chat` is the headless terminal chat, which prints cached/new tokens and TTFT per turn;
`omnidesk serve` is the local API server without a window (serve.py)."""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING, TextIO

from desktop.api.limits import raise_open_files

if TYPE_CHECKING:
    from desktop.model.params import SamplingParams

HELP = ("Commands: /regen (new reply to the last message), /reset (new conversation), /list (saved conversations), "
        "/stats (cache and speed so far), /help, /quit. Start a message with // to send one that begins with /. "
        "Every message is saved: `omnidesk chat --resume` continues the last conversation.")
COMMANDS = ("/regen", "/reset", "/list", "/stats", "/help", "/quit", "/exit")
CTRL_C_AGAIN = "(Press Ctrl+C again to leave; the conversation is saved. /quit leaves too.)"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="omnidesk", description="Omnidesk: a private local assistant whose KV cache survives between turns.")
    p.add_argument("command", nargs="?", default="gui", choices=["gui", "chat", "serve"],
                   help="gui: the desktop window (default; the terminal chat without a display) · chat: the terminal "
                        "chat · serve: the OpenAI-compatible API server without a window, on the settings' model")
    p.add_argument("--model", default=None, help="'default' (embedded SmolLM2), a local Hugging Face folder or a .gguf "
                   "file (chat: default; serve: the settings' model)")
    p.add_argument("--dtype", default=None, choices=["auto", "float32", "bfloat16", "float16"],
                   help="auto: bfloat16 on a GPU or a CPU with native bf16, else float32 (chat: auto; serve: the settings')")
    p.add_argument("--device", default=None, help="cpu, cuda or cuda:N (chat: cpu; serve: the settings')")
    p.add_argument("--host", default=None, help="serve: the address to listen on (default: the settings', 127.0.0.1); "
                   "beyond this computer an API key is required (the settings' or $OMNIDESK_API_KEY)")
    p.add_argument("--port", type=int, default=None, help="serve: the port (default: the settings', 8765)")
    p.add_argument("--system", default=None,
                   help="system prompt ('' for none; default: the preset chosen in the window, Assistant at first)")
    p.add_argument("--max-tokens", type=int, default=None, help="longest reply (default: the app's setting)")
    p.add_argument("--temperature", type=float, default=None,
                   help="0 always picks the likeliest word (default: the app's setting, as the window samples)")
    p.add_argument("--cache-mode", default="imc+spc", choices=["off", "spc", "imc", "imc+spc"])
    p.add_argument("--threads", type=int, default=min(4, os.cpu_count() or 1), help="CPU threads for the model")
    p.add_argument("--resume", nargs="?", const="", default=None, metavar="ID-OR-TITLE",
                   help="continue a saved conversation (the window's too): alone, the most recent; else the one "
                        "whose id or title starts with this")
    p.add_argument("--list", action="store_true", help="list the saved conversations and exit")
    args = p.parse_args(argv)
    if args.command != "serve":  # the terminal chat's own defaults (serve's None: the settings')
        args.model, args.dtype, args.device = args.model or "default", args.dtype or "auto", args.device or "cpu"
    return args


class Progress:
    """Loading progress on stderr: one line rewritten in place on a terminal; into a pipe or a
    log, one plain line per stage (no control codes, no line per percent)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.live = bool(getattr(self.stream, "isatty", lambda: False)())
        self.stage = ""

    def __call__(self, stage: str, fraction: float | None) -> None:
        if self.live:
            pct = f" {fraction * 100:.0f}%" if fraction is not None else ""
            print(f"\r\033[K{stage}{pct}", end="" if stage != "Ready" else "\n", file=self.stream, flush=True)
        elif stage != self.stage:
            print(stage, file=self.stream, flush=True)
        self.stage = stage


def chat_params(args: argparse.Namespace, sampling: SamplingParams) -> SamplingParams:
    """The app's sampling settings (as the window samples), with what the command line sets."""
    changes = {k: v for k, v in (("temperature", args.temperature), ("max_tokens", args.max_tokens)) if v is not None}
    return replace(sampling, **changes)


def system_prompt(args: argparse.Namespace, preset_id: str, presets) -> str:
    """--system when given, else the prompt of the preset the window's new chats use (Settings'
    system_preset; the first, "Assistant", when that one is gone). `presets`: a PresetStore."""
    if args.system is not None:
        return args.system
    preset = presets.get(preset_id) or presets.list()[0]
    return preset.prompt


def badge(stats) -> str:
    """One line of numbers about a finished turn (the same words as the chat window's badge)."""
    from dataclasses import asdict

    from desktop.chat.export import stats_line

    return f"[{stats_line(asdict(stats))}]"


def stats_text(snap: dict) -> str:
    """The worker's counters as a few readable, rounded lines (the terminal chat's /stats)."""
    requests, errors = int(snap.get("requests", 0)), int(snap.get("errors", 0))
    prompt, cached = int(snap.get("input_tokens", 0)), int(snap.get("tokens_saved", 0))
    lines = [f"Requests: {requests}" + (f" ({errors} failed)" if errors else "")]
    if requests:
        share = f" ({100.0 * cached / prompt:.0f}%)" if prompt else ""
        history = int(snap.get("history_tokens", 0))
        hits = (f"{100.0 * float(snap.get('cache_hit_rate', 0.0)):.0f}% of {history:,} history tokens reused"
                if history else "no history yet")
        lines += [f"Cache hits: {hits}",
                  f"Prompt tokens: {prompt:,} in all, {cached:,} from the cache{share}",
                  f"Reply tokens: {int(snap.get('generated_tokens', 0)):,}",
                  f"Time to first token: median {float(snap.get('ttft_p50_ms', 0.0)):.0f} ms, "
                  f"95th percentile {float(snap.get('ttft_p95_ms', 0.0)):.0f} ms"]
        reasons = snap.get("reasons") or {}
        if reasons:  # the same words as the badges
            lines.append("Why: " + ", ".join(f"{words} {n}" for words, n in reasons.items()))
    return "\n".join(lines)


def command_of(line: str) -> str | None:
    """The command a line asks for ("/stats"), or None for a message to the model. A first word
    like "/usr/lib" (a path) is a message; "//text" sends "/text"."""
    word = line.split(maxsplit=1)[0] if line.strip() else ""
    if not word.startswith("/") or word.startswith("//") or "/" in word[1:]:
        return None
    return word.lower()


def has_display() -> bool:
    """False on Linux/BSD without DISPLAY or WAYLAND_DISPLAY, unless QT_QPA_PLATFORM picks a platform."""
    if os.environ.get("QT_QPA_PLATFORM") or not sys.platform.startswith(("linux", "freebsd", "openbsd")):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    raise_open_files()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.list:  # no model needed
        from desktop.cli_conversation import listing
        from desktop.chat.conversations import ConversationStore

        print(listing(ConversationStore.default()))
        return 0
    if args.command == "serve":
        return _serve(args)
    if args.command == "gui":
        given = [a.split("=")[0] for a in (sys.argv[1:] if argv is None else argv) if a.startswith("--")]
        if given and has_display():
            print(f"omnidesk: {', '.join(given)} only apply to the terminal chat (`omnidesk chat`); the window "
                  "takes its model and options from Settings (Ctrl+,).", file=sys.stderr)
        if has_display():
            return main_gui()
        print("omnidesk: no display found (DISPLAY/WAYLAND_DISPLAY unset), so starting the terminal chat "
              "instead; set QT_QPA_PLATFORM to force the window.", file=sys.stderr)
    from desktop.errors import OmnideskError

    try:
        return _chat(args)
    except OmnideskError as err:
        print(f"\nerror: {err.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130


def _chat(args: argparse.Namespace) -> int:
    """The terminal chat, where SIGTERM and SIGHUP leave as /quit does (cli_signals)."""
    from desktop.cli_signals import Termination

    with Termination() as term:
        try:
            return _converse(args, term)
        except KeyboardInterrupt:
            if term.signal is None:
                raise
            print(file=sys.stderr)  # a quit signal while the model loads: nothing to save yet
            return 0


def _converse(args: argparse.Namespace, term) -> int:
    """The terminal chat until the user leaves; `term`: the Termination in force."""
    import torch

    from desktop.cli_conversation import TerminalConversation, find, listing
    from desktop.chat.conversations import ConversationStore
    from desktop.chat.presets import PresetStore
    from desktop.errors import OmnideskError
    from desktop.model.loader import ModelSpec, load_model
    from desktop.model.messages import parse_messages
    from desktop.protocol import Chat, ChunkEvent, Done, ErrorEvent, Stop
    from desktop.settings import load_settings
    from desktop.workers.local import LocalClient
    from desktop.workers.runtime import static_only

    store = ConversationStore.default()
    if store.notice:
        print(f"omnidesk: {store.notice}", file=sys.stderr)
    resumed = find(store, args.resume) if args.resume is not None else None
    if args.resume is not None and resumed is None:
        why = (f"no saved conversation's id or title starts with {args.resume.strip()!r}; `omnidesk chat --list` "
               "lists them" if args.resume.strip() else "there is no saved conversation to resume yet")
        print(f"omnidesk: {why}.", file=sys.stderr)
        return 2
    torch.set_num_threads(max(1, args.threads))
    settings, warning = load_settings()
    if warning:
        print(f"omnidesk: {warning}", file=sys.stderr)
    params = chat_params(args, settings.sampling())
    config = replace(settings.worker_config(), cache_mode=args.cache_mode)  # the disk tier too
    lm = load_model(ModelSpec(args.model, args.dtype, args.device), progress=Progress(), static=static_only(config))
    client = LocalClient(lm, config)
    prompt = system_prompt(args, settings.system_preset, PresetStore())
    preset = settings.system_preset if args.system is None else ""
    if resumed is not None:
        chat = TerminalConversation(store, resumed)
        if args.system is not None:  # else it keeps the prompt it was written with
            resumed.system_prompt = args.system
    else:
        chat = TerminalConversation.start(store, prompt, preset)
    print(f"{lm.name} on {lm.device} ({lm.dtype}), context {lm.context_length} tokens; temperature {params.temperature:g}, "
          f"replies up to {params.max_tokens} tokens. {HELP}", file=sys.stderr)
    if resumed is not None:
        print(chat.recap(lm.supports_images), file=sys.stderr)
    interactive = sys.stdin.isatty()
    interrupted = False  # the last thing at the prompt was a Ctrl+C
    while True:
        try:
            line = input("you> " if interactive else "")
        except EOFError:
            return leave(chat, client)
        except KeyboardInterrupt:  # a second one in a row leaves; nothing is lost either way
            print(file=sys.stderr)
            if interrupted or term.signal is not None:
                return leave(chat, client)
            interrupted = True
            print(CTRL_C_AGAIN, file=sys.stderr)
            continue
        interrupted = False
        line = line.strip()
        if not line:
            continue
        command = command_of(line)
        if command is not None and command not in COMMANDS:
            print(f"Unknown command {command} — try /help. (Start with // to send a message that begins with /.)")
            continue
        if line.startswith("//"):
            line = line[1:]
        if command in ("/quit", "/exit"):
            return leave(chat, client)
        if command == "/help":
            print(HELP)
            continue
        if command == "/list":
            print(listing(store))
            continue
        if command == "/reset":
            was = chat.describe() if chat.saved else ""
            chat = TerminalConversation.start(store, prompt, preset)
            print(f"(new conversation){' — the last one: ' + was if was else ''}")
            continue
        if command == "/stats":
            print(stats_text(client.worker.counters.snapshot()))
            continue
        previous = None  # the reply /regen replaces (kept as a version of the new one)
        if command == "/regen":
            if chat.last_role() not in ("assistant", "user"):
                print("(nothing to regenerate yet)")
                continue
            previous = chat.take_reply()
        else:
            chat.add_user(line)
        try:
            msgs = parse_messages(chat.request(images=lm.supports_images))
        except OmnideskError as err:
            print(f"error: {err.message}", file=sys.stderr)
            undo_turn(chat, previous, command)
            continue
        rid = uuid.uuid4().hex[:8]
        print("assistant> ", end="", flush=True)
        stream = client.stream(Chat(rid, msgs, params, "app", chat.conv.id))  # its KV is tagged with the conversation
        done = None
        while done is None:
            try:
                for event in stream:
                    if isinstance(event, ChunkEvent):
                        print(event.text_delta, end="", flush=True)
                    elif isinstance(event, (Done, ErrorEvent)):
                        done = event
            except KeyboardInterrupt:  # Ctrl+C stops the reply, keeps the conversation
                client.submit(Stop(rid))
                stream = client.stream(None, rid)
        print()
        if isinstance(done, ErrorEvent):
            print(f"error: {done.message}", file=sys.stderr)
            undo_turn(chat, previous, command)
            continue
        chat.add_reply(done.text, done.stats, replaces=previous)
        print(badge(done.stats), file=sys.stderr)
        if term.signal is not None:  # SIGTERM during the reply: it was stopped and saved; now leave
            return leave(chat, client)


def _serve(args: argparse.Namespace) -> int:
    """`omnidesk serve`: the settings' model and API server, with the command line's overrides."""
    from desktop import serve
    from desktop.logs import setup_logging
    from desktop.settings import load_settings

    setup_logging()
    settings, warning = load_settings()
    if warning:
        print(f"omnidesk: {warning}", file=sys.stderr)
    try:
        settings = serve.serve_settings(settings, host=args.host, port=args.port, model=args.model, device=args.device,
                                        dtype=args.dtype, key=os.environ.get(serve.KEY_ENV) or None)
    except serve.SettingsError as err:
        print(f"omnidesk serve: {err}", file=sys.stderr)
        return 2
    serve.leave(serve.main(settings))  # does not return
    return 0


def undo_turn(chat, previous, command: str | None) -> None:
    """A turn whose reply failed: /regen's reply back in place, else the message taken off."""
    if command == "/regen":
        chat.put_back(previous)
    else:
        chat.drop_last()


def leave(chat, client=None) -> int:
    """Leave the chat: the worker shut down (`client`, a LocalClient: its Shutdown writes the KV it
    holds to disk), then where the conversation is kept (`chat`: a TerminalConversation)."""
    if client is not None:
        close_worker(client)
    if chat.saved:
        try:
            print(chat.describe(), file=sys.stderr)
        except OSError:  # the terminal is gone (SIGHUP): nothing to tell
            pass
    return 0


def close_worker(client) -> None:
    """Send the worker its Shutdown and let it handle it, then close it, as the app's hosts do on
    quitting (Worker.serve ends with close())."""
    from desktop.protocol import Shutdown
    from desktop.workers.local import interrupts_held

    client.submit(Shutdown())
    with interrupts_held():
        client.worker.step()
        close = getattr(client.worker, "close", None)  # the disk tier's: idle conversations written out
        if close is not None:
            close()


def main_gui() -> int:
    """Entry point for the desktop window (`omnidesk-gui`); the model and the rest come from Settings."""
    from desktop.app import main_gui as run_gui

    raise_open_files()  # the local API, conversations and recordings share one process's files
    return run_gui()


if __name__ == "__main__":
    sys.exit(main())
