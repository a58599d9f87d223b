"""Aggregate decode tokens/s through the gateway for 1, 2, 4 and 8 concurrent conversations on the
embedded default, next to the raw batched forward at the same batch sizes (the limit).

Steady state only: the window runs from the moment every conversation has its first token to the
moment the first one finishes, so all N are in the batch throughout. The last line is JSON."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from desktop.gateway.gateway import Gateway  # noqa: E402
from desktop.protocol import ChunkEvent, Done  # noqa: E402
from desktop.model import kv  # noqa: E402
from desktop.model.loader import ModelSpec, load_model  # noqa: E402
from desktop.model.messages import Message  # noqa: E402
from desktop.model.params import SamplingParams  # noqa: E402
from desktop.workers.config import WorkerConfig  # noqa: E402
from desktop.workers.thread_host import ThreadHost  # noqa: E402

PROMPTS = ["Tell me about rivers.", "Explain how bread rises.", "Describe a quiet morning.", "Why is the sky blue?",
           "How do bees make honey?", "What makes a good song?", "Explain compound interest.", "Describe a busy port."]


async def through_gateway(gw: Gateway, n: int, tokens: int) -> float:
    stamps: list[list[float]] = [[] for _ in range(n)]
    ends: list[float] = []

    async def one(i: int) -> None:
        msgs = [Message("system", "You are a helpful assistant."), Message("user", PROMPTS[i % len(PROMPTS)] + f" ({i})")]
        async for event in gw.chat(msgs, SamplingParams(max_tokens=tokens, ignore_eos=True)):
            if isinstance(event, ChunkEvent):
                stamps[i].extend([time.perf_counter()] * max(1, len(event.token_ids)))
            elif isinstance(event, Done):
                ends.append(time.perf_counter())
            else:
                assert not hasattr(event, "code"), event

    await asyncio.gather(*(one(i) for i in range(n)))
    t0, t1 = max(s[0] for s in stamps), min(ends)
    count = sum(1 for s in stamps for t in s if t0 < t <= t1)
    return count / (t1 - t0)


@torch.no_grad()
def raw(lm, n: int, steps: int, context: int) -> float:
    """The limit: N rows of `context` tokens in one DecodeBatch, greedy argmax, nothing else."""
    batch = kv.DecodeBatch()
    for i in range(n):
        cache = kv.new_cache(lm.model.config)
        lm.model(input_ids=kv.as_batch(list(range(10 + i, 10 + i + context)), lm.model.device), past_key_values=cache, use_cache=True)
        batch.add(i, cache)
    tokens = [1] * n
    start = time.perf_counter()
    for _ in range(steps):
        out = lm.model(**batch.step_inputs(tokens, lm.model.device), use_cache=True)
        tokens = out.logits[:, -1].argmax(-1).tolist()
    return n * steps / (time.perf_counter() - start)


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--tokens", type=int, default=48)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--sessions", default="1,2,4,8")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    sizes = [int(x) for x in args.sessions.split(",")]
    spec = ModelSpec("default", args.dtype)
    gw = Gateway([ThreadHost("w0", spec, WorkerConfig(num_slots=max(sizes)), threads=args.threads)])
    await gw.start()
    assert await gw.wait_ready(600), "worker did not load"
    lm = load_model(spec)
    await through_gateway(gw, 1, 8)  # warm-up
    rows = []
    for n in sizes:
        gw_tok_s = await through_gateway(gw, n, args.tokens)
        raw_tok_s = raw(lm, n, args.tokens // 2, context=30)
        rows.append((n, gw_tok_s, raw_tok_s))
        print(json.dumps({"sessions": n, "tok_s": round(gw_tok_s, 2), "raw_tok_s": round(raw_tok_s, 2)}), flush=True)
    await gw.close()
    tok = {n: t for n, t, _ in rows}
    lim = {n: r for n, _, r in rows}
    big = max(sizes)
    print(json.dumps({
        "dtype": args.dtype, "threads": args.threads,
        "sessions": sizes, "tok_s": [round(tok[n], 2) for n in sizes], "raw_tok_s": [round(lim[n], 2) for n in sizes],
        f"speedup_{big}": round(tok[big] / tok[sizes[0]], 2), f"efficiency_{big}": round(tok[big] / lim[big], 3),
    }))


if __name__ == "__main__":
    asyncio.run(main())
