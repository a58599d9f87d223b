"""Typed chat: time to first token of a long message typed with pauses (its draft prefilled at
each pause, issue 21) against a short one, over a ≈2,000-token conversation already cached.

The embedded default model in one thread-hosted worker behind the real Gateway, as in the app.
Each case gets its own conversation (so each starts from the same state: the history cached, as
after the previous reply). The short case sends a ≈5-token message at once. The typed case
simulates a ≈200-token message typed at 5 characters a second: at that pace keys come every
200 ms, so the composer's 500 ms pause timer (ui/chat/page.py) fires only where the user stops;
we assume a pause after every sentence (≥ 0.5 s: reading it back, thinking of the next one) and
none elsewhere. At each pause the UI logic (chat/draft_warm.py) sends the conversation + the
draft so far as a warm; the bench sends the same warms and lets each finish (the next pause is
a whole sentence, ≈ 10 s at 5 chars/s, later). Two endings: Send pressed right after the last
keystroke (the last sentence was never prefilled: `typed_send_ttft_ms`, the one the target
uses) and Send after a pause (`typed_paused_send_ttft_ms`). TTFT is measured by the client: the
gateway call → the first streamed token (the worker's own figure is given too). The last line
is JSON: medians over `--repeats`."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from machine import machine  # noqa: E402
from desktop.chat.draft_warm import WARM  # noqa: E402
from desktop.gateway.gateway import Gateway  # noqa: E402
from desktop.model.loader import ModelSpec  # noqa: E402
from desktop.model.params import SamplingParams  # noqa: E402
from desktop.protocol import ChunkEvent, Done  # noqa: E402
from desktop.workers.config import WorkerConfig  # noqa: E402
from desktop.workers.thread_host import ThreadHost  # noqa: E402

QUESTION = "Can you tell me more about how the old harbour town changed over the last two centuries?"
ANSWER = ("The harbour town grew around its fishing fleet, and for a long time its life followed the "
          "seasons of the catch. When the railway arrived, merchants built warehouses along the quay, "
          "and the population doubled within a generation. Later the fishing declined, the warehouses "
          "became workshops and flats, and visitors began to come for the old streets and the sea air. ")
TYPED = ("Thanks, that is really helpful for the trip I am planning with my family next spring. "
         "There will be six of us, and it is the first time any of us will see that part of the coast. "
         "We will arrive by train on a Friday evening and stay for four nights in a small flat near the quay. "
         "My parents are in their seventies, so we cannot walk very far or climb steep streets every day. "
         "The children are eight and eleven, and they love boats, old castles and anything with animals. "
         "I would also like one quiet afternoon to visit the museum about the fishing fleet on my own. "
         "Could you suggest a plan for each day, with a morning and an afternoon activity? "
         "Please mention where we could eat lunch cheaply, and which places need tickets in advance. "
         "If it rains on one of the days, what could we do indoors instead? "
         "Keep the plan simple and short, because I will print it and take it with us.")
SHORT = "Thanks, go on."
REPLY = SamplingParams(max_tokens=2, temperature=0.0, ignore_eos=True)


def history(tag: str, turns: int) -> list[dict]:
    """A conversation of `turns` question/answer pairs (≈200 tokens each with the default model);
    `tag` makes it differ from every other one from its first tokens."""
    msgs = [{"role": "system", "content": f"Conversation {tag}. You are a helpful travel assistant."}]
    for i in range(turns):
        msgs += [{"role": "user", "content": f"{QUESTION} ({i + 1})"}, {"role": "assistant", "content": ANSWER * 2}]
    return msgs


def pauses(text: str) -> list[str]:
    """The drafts the composer holds at each pause: after every sentence but the last."""
    return [text[: m.end()] for m in re.finditer(r"[.?!](?= )", text)]  # the last one ends the text: no pause


async def send(gw: Gateway, msgs: list[dict]) -> dict:
    """A real request: client TTFT (call → first token) and the worker's stats."""
    t0 = time.perf_counter()
    first, done = None, None
    async for event in gw.chat(msgs, REPLY):
        if isinstance(event, ChunkEvent) and first is None:
            first = time.perf_counter()
        elif isinstance(event, Done):
            done = event
    assert done is not None and first is not None, done
    return {"ttft_ms": 1000.0 * (first - t0), "worker_ttft_ms": done.stats.ttft_ms, "input": done.stats.input_tokens,
            "cached": done.stats.cached_tokens, "history": done.stats.history_tokens}


async def warm(gw: Gateway, msgs: list[dict]) -> Done:
    done = None
    async for event in gw.chat(msgs, WARM):
        done = event
    return done


async def one(gw: Gateway, tag: str, turns: int, text: str, drafts: list[str]) -> dict:
    msgs = history(tag, turns)
    await send(gw, msgs)  # the history cached, as after its last reply (evicting an older case's)
    for draft in drafts:
        await warm(gw, msgs + [{"role": "user", "content": draft}])
    return await send(gw, msgs + [{"role": "user", "content": text}])


async def run(model: str = "default", dtype: str = "auto", threads: int = 1, turns: int = 11, repeats: int = 3,
              warms: bool = True) -> dict:
    """`warms` False: nothing is prefilled while typing (the baseline)."""
    drafts = pauses(TYPED) if warms else []
    paused = drafts + [TYPED] if warms else []
    config = WorkerConfig(num_slots=2)  # as the app's CPU worker would hold two long conversations
    gw = Gateway([ThreadHost("w0", ModelSpec(model, dtype), config, threads=threads)])
    await gw.start()
    try:
        if not await gw.wait_ready(timeout=600):
            raise SystemExit("The model did not load.")
        await one(gw, "warm-up", 1, SHORT, [])  # first-call costs
        rows: dict[str, list[dict]] = {"short": [], "typed": [], "paused": []}
        for r in range(repeats):  # interleaved, so that the load of the machine weighs on each alike
            rows["short"].append(await one(gw, f"{r}s", turns, SHORT, []))
            rows["typed"].append(await one(gw, f"{r}t", turns, TYPED, drafts))
            rows["paused"].append(await one(gw, f"{r}p", turns, TYPED, paused))
    finally:
        await gw.close()
    med = {k: {f: statistics.median(row[f] for row in v) for f in v[0]} for k, v in rows.items()}
    short, typed, paused = med["short"], med["typed"], med["paused"]
    return {
        **machine(), "model": model, "dtype": dtype, "threads": threads, "repeats": repeats, "warms": warms,
        "history_tokens": int(short["history"]),
        "short_message_tokens": int(short["input"] - short["history"]),
        "typed_message_tokens": int(typed["input"] - typed["history"]),
        "typed_chars": len(TYPED), "typing_chars_per_s": 5.0, "pauses": len(drafts),
        "typed_prefilled_while_typing": int(typed["cached"] - typed["history"]),
        "short_send_ttft_ms": round(short["ttft_ms"], 1),
        "typed_send_ttft_ms": round(typed["ttft_ms"], 1),
        "typed_paused_send_ttft_ms": round(paused["ttft_ms"], 1),
        "short_worker_ttft_ms": round(short["worker_ttft_ms"], 1),
        "typed_worker_ttft_ms": round(typed["worker_ttft_ms"], 1),
        "typed_send_over_short": round(typed["ttft_ms"] / short["ttft_ms"], 3),
        "typed_paused_over_short": round(paused["ttft_ms"] / short["ttft_ms"], 3),
    }


def measure(**kw) -> dict:
    """The figures as a dict (bench/call.py may import this); keywords as `run`'s."""
    return asyncio.run(run(**kw))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--turns", type=int, default=11, help="question/answer pairs of history (≈200 tokens each)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-warm", action="store_true", help="the same without prefilling while typing (a baseline)")
    args = ap.parse_args()
    print(json.dumps(measure(model=args.model, dtype=args.dtype, threads=args.threads, turns=args.turns,
                             repeats=args.repeats, warms=not args.no_warm)))


if __name__ == "__main__":
    main()
