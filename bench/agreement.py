"""Greedy agreement of cached and uncached replies over random multi-turn conversations, on any
device and dtype (issue 25: bf16 on a GPU, where the tests' fp32 invariant is not exact).

`--conversations` random chats (a system prompt and user turns of random length, seeded) run
`--turns` turns. Every turn, all chats are sent at once to a worker that keeps the cache (so turn
2 onwards extends the kept KV, batched with the others) and to a worker with the cache off (every
prompt prefilled whole, batched the same way). Both are asked the same request: the history holds
the cached worker's earlier replies. Reported: how many replies are identical, how many agree on
the first token, the mean share of each reply that agrees from the start, and how many turns
really reused the cache (match kind `extend`). In float32 every reply should agree; in bf16 a
different prefill split may flip a near tie, after which the two replies go their own ways.
Random-init weights make near ties common: their logits are flat. The last line is JSON."""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from bench import random_llama  # noqa: E402
from bench.multiturn import WORDS  # noqa: E402
from desktop.errors import ModelLoadError  # noqa: E402
from desktop.model.loader import LoadedModel, ModelSpec, load_model  # noqa: E402
from desktop.model.messages import Message  # noqa: E402
from desktop.model.params import SamplingParams  # noqa: E402
from desktop.protocol import Chat, Done  # noqa: E402
from desktop.workers.config import WorkerConfig  # noqa: E402
from desktop.workers.local import LocalClient  # noqa: E402

VOCAB = list(WORDS)


def words(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choice(VOCAB) for _ in range(rng.randint(lo, hi)))


def run_all(client: LocalClient, chats: list[Chat]) -> dict[str, Done]:
    """Submit every chat, step the worker until it is idle; each chat's Done."""
    for chat in chats:
        client.submit(chat)
    while client.worker.step():
        pass
    out = {}
    for chat in chats:
        last = client.events[chat.request_id][-1]
        if not isinstance(last, Done):
            raise SystemExit(f"{chat.request_id} failed in the worker: {last}")
        out[chat.request_id] = last
    return out


def agreeing(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def compare(lm: LoadedModel, conversations: int, turns: int, tokens: int, runner: str, seed: int) -> dict:
    rngs = [random.Random(seed * 1000 + c) for c in range(conversations)]
    history = [[Message("system", words(r, 5, 60))] for r in rngs]
    slots = conversations
    cached = LocalClient(lm, WorkerConfig(num_slots=slots, runner=runner))
    plain = LocalClient(lm, WorkerConfig(num_slots=slots, runner=runner, cache_mode="off"))
    params = SamplingParams(max_tokens=tokens)  # greedy
    same = first = extends = 0
    shares, elapsed = [], {"cached": 0.0, "uncached": 0.0}
    for t in range(turns):
        for c, r in enumerate(rngs):
            history[c].append(Message("user", words(r, 3, 90)))
        chats = [Chat(f"c{c}.t{t}", tuple(history[c]), params) for c in range(conversations)]
        start = time.perf_counter()
        a = run_all(cached, chats)
        elapsed["cached"] += time.perf_counter() - start
        start = time.perf_counter()
        b = run_all(plain, [Chat(f"u{c}.t{t}", ch.messages, params) for c, ch in enumerate(chats)])
        elapsed["uncached"] += time.perf_counter() - start
        for c in range(conversations):
            x, y = a[f"c{c}.t{t}"], b[f"u{c}.t{t}"]
            n = agreeing(x.token_ids, y.token_ids)
            same += x.token_ids == y.token_ids
            first += n > 0
            shares.append(n / max(len(x.token_ids), len(y.token_ids), 1))
            extends += t > 0 and x.stats.kind == "extend"
            history[c].append(Message("assistant", x.text))
    replies = conversations * turns
    return dict(
        model=lm.name, dtype=lm.dtype, device=str(lm.model.device), runner=type(cached.worker.runner).__name__,
        conversations=conversations, turns=turns, tokens=tokens, replies=replies,
        identical=same, identical_share=round(same / replies, 4), first_token_agree=first,
        mean_agreeing_share=round(statistics.fmean(shares), 4),
        cache_extends=extends, cache_extends_of=conversations * (turns - 1),
        cached_s=round(elapsed["cached"], 2), uncached_s=round(elapsed["uncached"], 2),
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--model", default="tiny", help='"tiny", "default", a model folder, or a bench/random_llama.py shape')
    p.add_argument("--tokenizer", default=None, help="random shapes: folder with the default model's tokenizer")
    p.add_argument("--dtype", default="auto", choices=["auto", "bfloat16", "float16", "float32"])
    p.add_argument("--runner", default="auto")
    p.add_argument("--conversations", type=int, default=20)
    p.add_argument("--turns", type=int, default=3)
    p.add_argument("--tokens", type=int, default=24, help="greedy tokens per reply")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.model in random_llama.NEEDS_CUDA and args.device != "cuda":
        p.exit(2, f"--model {args.model} needs --device cuda.\n")
    try:
        if args.model in random_llama.SHAPES:
            lm = random_llama.build(args.model, args.dtype, args.tokenizer, args.device)
        else:
            lm = load_model(ModelSpec(args.model, args.dtype, args.device))
    except ModelLoadError as exc:
        raise SystemExit(str(exc)) from None
    row = compare(lm, args.conversations, args.turns, args.tokens, args.runner, args.seed)
    row["gpu"] = torch.cuda.get_device_name() if args.device == "cuda" else None
    print(json.dumps(row))


if __name__ == "__main__":
    main()
