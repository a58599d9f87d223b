"""Many short messages against a few long ones (issue 19, item 8: "prefill runs per message").

Two conversations of about the same token count on the embedded default model: `--messages`
one-to-three-word messages (an agent's or a call's many short turns), and the same words in a
handful of long messages, repeated to the same token count. Each is sent once to a cold worker (the cache off, the app's prefill
chunk), with a one-token reply: the worker's TTFT is the prefill. Both are measured `--repeats`
times, alternating, and the medians are compared per token. Prefill batches across message
boundaries when `many_over_few_ms_per_token` is close to 1 (target ≤ 1.3; the issue measured
105.6 s for 1,001 short messages where a few long ones of the same size took ≈ 14 s, ≈ 6.6×).
The last line is JSON with the CPU."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from desktop.model.loader import ModelSpec, load_model  # noqa: E402
from desktop.model.messages import Message  # noqa: E402
from desktop.model.params import SamplingParams  # noqa: E402
from desktop.protocol import Chat, Done  # noqa: E402
from desktop.workers.config import WorkerConfig  # noqa: E402
from machine import machine  # noqa: E402
from served_worker import ServedWorker  # noqa: E402

WORDS = ("yes", "ok", "sure thing", "go on", "and then", "why not", "right", "tell me more", "fine", "next one")
TARGET = 1.3


def many(n: int) -> list[Message]:
    msgs = [Message("system", "You are brief.")]
    for i in range(n):
        msgs.append(Message("user" if i % 2 == 0 else "assistant", WORDS[(i * 7) % len(WORDS)]))
    if msgs[-1].role != "user":
        msgs.append(Message("user", "ok"))
    return msgs


def few(short: list[Message], parts: int, count, tokens: int) -> list[Message]:
    """The same words in `parts` long user/assistant messages (ending with a user's), repeated
    until the prompt has about `tokens` tokens (`count(messages)`): the two forms are compared at
    the same length, since attention's cost per token grows with it."""
    words = [m.content for m in short[1:]]
    while True:
        size = -(-len(words) // parts)
        out = [short[0]]
        for k in range(parts):
            out.append(Message("user" if k % 2 == 0 else "assistant", " ".join(words[k * size : (k + 1) * size])))
        if out[-1].role != "user":
            out.append(Message("user", "ok"))
        if count(out) >= tokens:
            return out
        words += words[: max(1, len(words) * (tokens - count(out)) // max(count(out), 1))]


def prefill(worker: ServedWorker, rid: str, msgs: list[Message]) -> dict:
    events = worker.run(Chat(rid, tuple(msgs), SamplingParams(max_tokens=1, temperature=0.0)))
    done = events[-1][1]
    if not isinstance(done, Done):
        raise SystemExit(f"{rid} failed: {getattr(done, 'message', done)}")
    return {"ttft_ms": done.stats.ttft_ms, "tokens": done.stats.input_tokens}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=1001)
    ap.add_argument("--parts", type=int, default=5, help="messages of the long form")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--model", default="default")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    lm = load_model(ModelSpec(args.model, "auto"))
    short = many(args.messages)
    count = lambda msgs: len(lm.template.prompt_ids(msgs))  # noqa: E731
    long = few(short, args.parts, count, count(short))
    worker = ServedWorker(lm, WorkerConfig(cache_mode="off"), "cold")
    prefill(worker, "warm-up", [Message("user", "Say hi.")])
    rows: dict[str, list[dict]] = {"many": [], "few": []}
    for r in range(args.repeats):
        for name, msgs in (("many", short), ("few", long)):
            row = prefill(worker, f"{name}-{r}", msgs)
            rows[name].append(row)
            print(json.dumps({name: row}), file=sys.stderr, flush=True)
    worker.close()
    per = {k: statistics.median(r["ttft_ms"] / r["tokens"] for r in v) for k, v in rows.items()}
    ratio = per["many"] / per["few"]
    out = {
        "messages": len(short), "long_messages": len(long),
        "many_tokens": rows["many"][0]["tokens"], "few_tokens": rows["few"][0]["tokens"],
        "many_prefill_ms": round(statistics.median(r["ttft_ms"] for r in rows["many"])),
        "few_prefill_ms": round(statistics.median(r["ttft_ms"] for r in rows["few"])),
        "many_ms_per_token": round(per["many"], 3), "few_ms_per_token": round(per["few"], 3),
        "many_over_few_ms_per_token": round(ratio, 3),
        "targets": {"many_over_few_ms_per_token": {"value": round(ratio, 3), "max": TARGET, "met": ratio <= TARGET}},
        **machine(),
    }
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
