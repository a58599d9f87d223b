"""A conversation and a call far past the model's window (issue 22): every turn answered, no
reply read twice, and late turns as quick as early ones.

The embedded default model (8,192-token window) in one thread-hosted worker behind the real
Gateway, the app's worker config, the default preset's system prompt and the app's sampling
(Settings defaults: temperature, top-p, repetition penalty; a seed per turn). The user messages
ask for paragraph breaks, lists and code (bench/filler.py), the shapes whose generated tokens
differ from the same text tokenised again.

Chat: `--turns` turns (≈110-token user message, reply of at most `--reply-tokens` 40), the whole
conversation sent each turn as the app's chat does (Gateway.chat with the conversation's id).
Call: a `--call-minutes` call on a virtual clock, a turn every `--turn-every` 15 s: one gateway
session for the whole call (create_session(call=True)), each turn one generate_stream(session,
params, [the user's words]) as desktop/call/replies.py sends it; no audio (the words are text;
no drafts). Per part:
- `unanswered`: turns that got no reply (an error, or never sent once the part gave up);
- `reread_reply_tokens`: tokens of earlier replies prefilled again, outside slide turns: per turn
  (PrefillDone) the prefilled tokens minus what the turn must read: the new message's own
  tokens, the template's markers around it and the generation prompt, and the previous reply's
  last token (sampled, never fed) with the markers that close it;
- `slides`: turns whose PrefillDone says `slid` (the oldest messages left the view), reported
  apart with their TTFT and prefilled tokens;
- `late_over_early_ttft`: the median TTFT of the turns after the first slide (slide turns out)
  over the median of turns 2–10.
A build without the sliding window fails turns at the window: the part stops after 3 failures in
a row (the rest counted unanswered) with a `note`. The last line is JSON with the CPU and
`targets`. Progress goes to stderr. On 2 cores the full run takes ≈ 20–30 minutes."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from desktop.chat.presets import load_builtin  # noqa: E402
from desktop.errors import OmnideskError  # noqa: E402
from desktop.gateway.gateway import Gateway  # noqa: E402
from desktop.media.clock import VirtualClock  # noqa: E402
from desktop.model.chat_template import ChatTemplate  # noqa: E402
from desktop.model.loader import ModelSpec  # noqa: E402
from desktop.model.messages import Message  # noqa: E402
from desktop.protocol import Done, ErrorEvent, PrefillDone  # noqa: E402
from desktop.settings import Settings  # noqa: E402
from desktop.workers.config import WorkerConfig  # noqa: E402
from desktop.workers.thread_host import ThreadHost  # noqa: E402
from filler import request, shaped  # noqa: E402
from machine import machine  # noqa: E402

GIVE_UP = 3  # failed turns in a row after which a part stops (a build that cannot slide)
TARGETS = {"unanswered": ("==", 0), "reread_reply_tokens": ("==", 0), "late_over_early_ttft": ("<=", 1.3)}


def template_of(model: str) -> ChatTemplate:
    """The model's chat template on this side (its tokenizer only), to count what a turn must read."""
    if model == "tiny":
        from desktop.model.tiny import tiny_tokenizer

        return ChatTemplate(tiny_tokenizer())
    from transformers import AutoTokenizer

    if model == "default":
        from desktop.model.default_model import ensure_converted

        return ChatTemplate(AutoTokenizer.from_pretrained(ensure_converted()))
    return ChatTemplate(AutoTokenizer.from_pretrained(model))


def must_read(template: ChatTemplate, history: list[Message], new: Message, previous: tuple[int, ...]) -> int:
    """Tokens a turn has to prefill when its history is cached: the new message with its markers
    and the generation prompt, and after a reply its last token (sampled, never fed) and the
    markers that close it."""
    n = len(template.encode_delta(history, [new], verify=False).ids) + len(template.gen_prompt_ids)
    if previous:
        n += 1 + len(template.close_after_reply(list(previous)))
    return n


@dataclasses.dataclass
class Turn:
    n: int
    at_s: float  # when it was sent: the chat's wall clock, the call's virtual clock
    wall_s: float = 0.0
    ttft_ms: float | None = None
    input: int = 0
    cached: int = 0
    kind: str = ""
    must: int = 0
    slid: bool = False
    window_start: int | None = None
    generated: int = 0
    error: str = ""
    reply: str = ""  # its first words (progress)
    shapes: dict = dataclasses.field(default_factory=dict)

    @property
    def prefilled(self) -> int:
        return self.input - self.cached

    @property
    def reread(self) -> int:
        return max(0, self.prefilled - self.must) if self.n > 1 and not self.slid and not self.error else 0


async def follow(stream, turn: Turn, t0: float) -> Done | None:
    """Read a turn's stream into `turn`; its Done (None on an error)."""
    done = None
    async for event in stream:
        if isinstance(event, PrefillDone):
            turn.input, turn.cached, turn.kind = event.input_tokens, event.cached_tokens, str(event.kind)
            turn.slid = bool(getattr(event, "slid", False))
            turn.window_start = getattr(event, "window_start", None)
        elif isinstance(event, Done):
            done = event
            turn.ttft_ms, turn.generated = event.stats.ttft_ms, event.stats.generated_tokens
            turn.input, turn.cached = turn.input or event.stats.input_tokens, turn.cached or event.stats.cached_tokens
            turn.shapes, turn.reply = shaped(event.text), event.text[:60]
        elif isinstance(event, ErrorEvent):
            turn.error = event.message
    turn.wall_s = time.perf_counter() - t0
    return done


def progress(part: str, turn: Turn, total: int, elapsed: float) -> None:
    if turn.error:
        line = f"ERROR {turn.error}"
    else:
        line = (f"ttft {turn.ttft_ms:7.1f} ms  in {turn.input:5d} cached {turn.cached:5d} new {turn.prefilled:4d} "
                f"(must {turn.must:3d}) gen {turn.generated:3d} {turn.kind}{' SLID' if turn.slid else ''}"
                f"{'' if turn.window_start is None else f' window@{turn.window_start}'} {turn.reply!r}")
    left = elapsed / turn.n * (total - turn.n) / 60  # at this part's pace so far
    print(f"{part} {turn.n:4d}/{total} {line} [{elapsed / 60:.1f} min, ≈{left:.0f} min left]", file=sys.stderr, flush=True)


async def chat_part(gw: Gateway, template: ChatTemplate, args: argparse.Namespace, system: str, params) -> dict:
    msgs, turns, previous, failed = [Message("system", system)], [], (), 0
    start = time.perf_counter()
    for n in range(1, args.turns + 1):
        user = Message("user", request(template.tokenize, args.user_tokens, n))
        turn = Turn(n, time.perf_counter() - start, must=must_read(template, msgs, user, previous))
        msgs.append(user)
        t0 = time.perf_counter()
        try:
            done = await follow(gw.chat(msgs, dataclasses.replace(params, seed=n), conversation="long-chat"), turn, t0)
        except OmnideskError as exc:  # refused at the door
            done, turn.error = None, exc.message
        turns.append(turn)
        progress("chat", turn, args.turns, time.perf_counter() - start)
        if done is None:
            failed += 1
            msgs.pop()  # as a failed send leaves nothing to answer
            if failed >= GIVE_UP:
                break
            continue
        failed, previous = 0, done.token_ids
        msgs.append(Message("assistant", done.text))
    return report(turns, args.turns, time.perf_counter() - start)


async def call_part(gw: Gateway, template: ChatTemplate, args: argparse.Namespace, system: str, params) -> dict:
    clock = VirtualClock()
    total = int(args.call_minutes * 60 / args.turn_every)
    session = await gw.create_session(system, call=True)
    history, turns, previous, failed = [Message("system", system)], [], (), 0
    start = time.perf_counter()
    try:
        for n in range(1, total + 1):
            user = Message("user", request(template.tokenize, args.call_user_tokens, 1000 + n))
            turn = Turn(n, clock.now(), must=must_read(template, history, user, previous))
            t0 = time.perf_counter()
            try:  # as desktop/call/replies.py: the words go in and the reply starts, in one command
                words = [{"role": "user", "content": user.content}]
                stream = gw.generate_stream(session, dataclasses.replace(params, seed=10_000 + n), words)
                done = await follow(stream, turn, t0)
            except OmnideskError as exc:
                done, turn.error = None, exc.message
            turns.append(turn)
            progress("call", turn, total, time.perf_counter() - start)
            clock.advance(args.turn_every)  # the next turn comes 15 s later, whatever this one took
            if done is None:
                failed += 1
                if failed >= GIVE_UP:
                    break
                continue
            failed, previous = 0, done.token_ids
            history += [user, Message("assistant", done.text)]
    finally:
        await gw.end_session(session)
    out = report(turns, total, time.perf_counter() - start)
    out.update(call_minutes=round(clock.now() / 60, 1), turn_every_s=args.turn_every,
               turns_over_interval=sum(t.wall_s > args.turn_every for t in turns))
    return out


def med(values: list[float]) -> float | None:
    return round(statistics.median(values), 1) if values else None


def report(turns: list[Turn], planned: int, wall_s: float) -> dict:
    answered = [t for t in turns if not t.error]
    slides = [t for t in answered if t.slid]
    first_slide = slides[0].n if slides else None
    early = [t.ttft_ms for t in answered if 2 <= t.n <= 10 and not t.slid]
    late = [t.ttft_ms for t in answered if first_slide is not None and t.n > first_slide and not t.slid]
    errors = sorted({t.error for t in turns if t.error})
    out = {
        "turns": planned, "answered": len(answered), "unanswered": planned - len(answered),
        "reread_reply_tokens": sum(t.reread for t in answered),
        "turns_rereading": sum(t.reread > 0 for t in answered),
        "slides": len(slides), "first_slide_turn": first_slide,
        "slide_turns": [t.n for t in slides],
        "slide_ttft_ms": [round(t.ttft_ms, 1) for t in slides], "slide_ttft_ms_p50": med([t.ttft_ms for t in slides]),
        "slide_prefilled_tokens_p50": med([t.prefilled for t in slides]),
        "ttft_early_ms_p50": med(early), "ttft_late_ms_p50": med(late),
        "late_over_early_ttft": round(med(late) / med(early), 3) if late and early else None,
        "kv_tokens_last": (answered[-1].input + answered[-1].generated) if answered else None,
        "window_start_last": answered[-1].window_start if answered else None,
        "replies_with": {k: sum(t.shapes.get(k, False) for t in answered) for k in ("paragraph_break", "list", "code")},
        "wall_s": round(wall_s, 1), "wall_s_per_turn": round(wall_s / max(len(turns), 1), 2),
    }
    if errors:
        out["errors"] = errors[:3]
    if len(turns) < planned or (answered and not slides and out["unanswered"]):
        out["note"] = (f"stopped after {GIVE_UP} failed turns in a row at turn {turns[-1].n} (no sliding window in this "
                       f"build?): {errors[0] if errors else ''}")
    return out


def targets(out: dict) -> dict:
    met = {}
    for part in ("chat", "call"):
        got = out.get(part) or {}
        for key, (op, bound) in TARGETS.items():
            v = got.get(key)
            met[f"{part}_{key}"] = None if v is None else (v == bound if op == "==" else v <= bound)
    return met


async def run(args: argparse.Namespace) -> dict:
    settings = Settings()
    params = dataclasses.replace(settings.sampling(), max_tokens=args.reply_tokens)
    system = next((p.prompt for p in load_builtin() if p.id == settings.system_preset), load_builtin()[0].prompt)
    template = template_of(args.model)
    gw = Gateway([ThreadHost("w0", ModelSpec(args.model, args.dtype), WorkerConfig(), threads=args.threads)])
    await gw.start()
    out: dict = {"model": args.model, "dtype": args.dtype, "threads": args.threads,
                 "temperature": params.temperature, "top_p": params.top_p, "reply_tokens": args.reply_tokens,
                 "user_tokens": args.user_tokens, "call_user_tokens": args.call_user_tokens}
    try:
        if not await gw.wait_ready(timeout=600):
            raise SystemExit("The model did not load.")
        out["window"] = gw.context_length()
        skip = set(args.skip.split(","))
        if "chat" not in skip and args.turns:
            out["chat"] = await chat_part(gw, template, args, system, params)
        if "call" not in skip and args.call_minutes:
            out["call"] = await call_part(gw, template, args, system, params)
    finally:
        await gw.close()
    return out


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=400, help="turns of the chat (0: no chat)")
    ap.add_argument("--call-minutes", type=float, default=60.0, help="minutes of the call on the virtual clock (0: no call)")
    ap.add_argument("--turn-every", type=float, default=15.0, help="seconds between the call's turns")
    ap.add_argument("--user-tokens", type=int, default=110, help="tokens of a chat message")
    ap.add_argument("--call-user-tokens", type=int, default=110, help="tokens of what the user says in a call turn")
    ap.add_argument("--reply-tokens", type=int, default=40, help="a reply's most tokens")
    ap.add_argument("--model", default="default", help="default (the embedded model), tiny (a smoke test), or a folder")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--skip", default="", help="parts to leave out, comma-separated: chat, call")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = parse(argv)
    torch.set_num_threads(args.threads)
    out = asyncio.run(run(args))
    out.update(machine())
    out["load_avg"] = round(os.getloadavg()[0], 2)
    out["targets"] = targets(out)
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
