"""Multi-turn TTFT with the KV cache kept between turns vs rebuilt every turn, on the embedded default.

Per turn: TTFT cached, TTFT uncached, and the limit (prefilling only that turn's new tokens on an
empty cache). A long variant has ≈4,000 tokens of history before its last turn. The last line is
JSON. `--quick` runs a shorter version (under a minute once the model is converted)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from desktop.engine.protocol import Chat, Done  # noqa: E402
from desktop.model import kv  # noqa: E402
from desktop.model.loader import LoadedModel, ModelSpec, load_model  # noqa: E402
from desktop.model.messages import Message  # noqa: E402
from desktop.model.params import SamplingParams  # noqa: E402
from desktop.workers.config import WorkerConfig  # noqa: E402
from desktop.workers.local import LocalClient  # noqa: E402

WORDS = (
    "the model keeps each conversation in memory so that a new turn only needs its own tokens "
    "people ask about travel plans recipes code reviews gardening music history and small repairs "
    "a careful answer explains the steps names the trade offs and ends with one clear suggestion"
).split()


def text_of(lm: LoadedModel, tokens: int, seed: int) -> str:
    """Deterministic prose of about `tokens` tokens."""
    words, i = [], seed
    while len(lm.template.tokenize(" ".join(words))) < tokens:
        words.append(WORDS[(i * 7 + len(words) * 3) % len(WORDS)])
        if len(words) % 12 == 0:
            words[-1] += "."
        i += 1
    return " ".join(words)


def conversation(lm: LoadedModel, turns: int, system_tokens: int = 300, user: int = 60, reply: int = 80) -> list[list[Message]]:
    """The request of each turn: system, then user/assistant pairs fed back as history."""
    msgs = [Message("system", text_of(lm, system_tokens, 1))]
    requests = []
    for t in range(turns):
        msgs.append(Message("user", text_of(lm, user, 100 + t)))
        requests.append(list(msgs))
        msgs.append(Message("assistant", text_of(lm, reply, 200 + t)))
    return requests


def ttft(client: LocalClient, rid: str, msgs: list[Message]) -> Done:
    done = client.run(Chat(rid, tuple(msgs), SamplingParams(max_tokens=1)))[-1]
    assert isinstance(done, Done), done
    return done


@torch.no_grad()
def limit_ms(lm: LoadedModel, ids: list[int], chunk: int) -> float:
    """Prefill only `ids` on an empty cache (same chunking as the worker) and pick the first token."""
    start = time.perf_counter()
    cache = kv.new_cache(lm.model.config)
    for i in range(0, len(ids), chunk):
        out = lm.model(input_ids=kv.as_batch(ids[i : i + chunk], lm.model.device), past_key_values=cache, use_cache=True, logits_to_keep=1)
    int(out.logits[0, -1].argmax())
    return 1000.0 * (time.perf_counter() - start)


def run_turns(lm, requests, cfg, repeats: int) -> list[dict]:
    cached = LocalClient(lm, cfg)
    uncached = LocalClient(lm, WorkerConfig(cache_mode="off"))
    rows = []
    for t, msgs in enumerate(requests):
        on = ttft(cached, f"on{t}", msgs)
        delta = lm.template.prompt_ids(msgs)[on.stats.cached_tokens :]
        offs, lims = [], []
        for r in range(repeats):  # interleaved, so machine noise hits all three alike
            offs.append(ttft(uncached, f"off{t}.{r}", msgs).stats.ttft_ms)
            lims.append(limit_ms(lm, delta, cfg.prefill_chunk))
        rows.append(
            dict(turn=t + 1, input=on.stats.input_tokens, cached=on.stats.cached_tokens, kind=on.stats.kind,
                 cached_ms=on.stats.ttft_ms, uncached_ms=statistics.median(offs), limit_ms=statistics.median(lims))
        )
        print(json.dumps(rows[-1]), flush=True)
    return rows


def long_variant(lm, cfg, history_tokens: int, repeats: int) -> dict:
    """Warm the cache with ≈history_tokens of conversation, then time the next turn both ways."""
    turns = max(2, round((history_tokens - 300) / 140) + 1)
    requests = conversation(lm, turns)
    cached = LocalClient(lm, cfg)
    uncached = LocalClient(lm, WorkerConfig(cache_mode="off"))
    ttft(cached, "warm", requests[-2])
    ons, offs = [], []
    last = requests[-1]
    for r in range(repeats):
        ons.append(ttft(cached, f"long-on{r}", last).stats.ttft_ms)  # a hit after the first: regenerate
        offs.append(ttft(uncached, f"long-off{r}", last).stats.ttft_ms)
    history = len(lm.template.prompt_ids(requests[-2]))
    return dict(history_tokens=history, input=len(lm.template.prompt_ids(last)), cached_ms=ons[0], uncached_ms=statistics.median(offs))


def decode_rate(lm, cfg, msgs, tokens: int) -> float:
    client = LocalClient(lm, cfg)
    done = client.run(Chat("decode", tuple(msgs), SamplingParams(max_tokens=tokens)))[-1]
    return done.stats.tok_s


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--quick", action="store_true", help="4 turns, ≈1,500 tokens long variant, 1 repeat")
    p.add_argument("--model", default="default")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    lm = load_model(ModelSpec(args.model, args.dtype))
    cfg = WorkerConfig(num_slots=2)
    turns, history, repeats = (4, 1500, 1) if args.quick else (8, 4000, 3)
    requests = conversation(lm, turns)
    ttft(LocalClient(lm, cfg), "warmup", requests[0])  # first-call overheads out of the way
    rows = run_turns(lm, requests, cfg, repeats)
    long = long_variant(lm, cfg, history, repeats)
    print(json.dumps({"long": long}), flush=True)
    decode = decode_rate(lm, cfg, requests[-1], 32 if args.quick else 64)
    last = rows[-1]
    print(json.dumps({
        "model": lm.name, "dtype": lm.dtype, "threads": args.threads, "quick": args.quick,
        "turns": [r["turn"] for r in rows],
        "input_tokens": [r["input"] for r in rows],
        "cached_tokens": [r["cached"] for r in rows],
        "ttft_cached_ms": [round(r["cached_ms"], 1) for r in rows],
        "ttft_uncached_ms": [round(r["uncached_ms"], 1) for r in rows],
        "limit_ms": [round(r["limit_ms"], 1) for r in rows],
        "speedup_last": round(last["uncached_ms"] / last["cached_ms"], 2),
        "over_limit_last": round(last["cached_ms"] / last["limit_ms"], 3),
        "long_history_tokens": long["history_tokens"],
        "ttft_long_cached_ms": round(long["cached_ms"], 1),
        "ttft_long_uncached_ms": round(long["uncached_ms"], 1),
        "speedup_long": round(long["uncached_ms"] / long["cached_ms"], 2),
        "decode_tok_s": round(decode, 2),
    }))


if __name__ == "__main__":
    main()
