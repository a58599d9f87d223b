"""Multi-turn TTFT with the KV cache kept between turns vs rebuilt every turn, on the embedded default.

A fixed 8-turn conversation: a ≈300-token system prompt, ≈60-token user turns, and ≈80-token
assistant turns that the model generates and that are fed back as history (as a chat client does).

Per turn: TTFT cached, TTFT uncached, the limit (prefilling only that turn's new tokens on an
empty slot of the engine's own model runner) and the floor (the same new tokens over the kept history's K/V: the model's own cost
of a cached turn, so cached/floor is the engine's overhead). A long variant has ≈4,000 tokens of history before its last turn. The last line is
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

from desktop.protocol import Chat, Done  # noqa: E402
from desktop.model.loader import LoadedModel, ModelSpec, load_model  # noqa: E402
from desktop.model.messages import Message  # noqa: E402
from desktop.model.params import SamplingParams  # noqa: E402
from desktop.workers.config import RUNNERS, WorkerConfig  # noqa: E402
from desktop.workers.runner import make_runner  # noqa: E402
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
    """Scripted requests: system, then user/assistant pairs (the long variant's older history)."""
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


def _prefill(runner, ids: list[int], chunk: int, sample: bool) -> None:
    sampler = runner.sampler(SamplingParams(max_tokens=1))
    for i in range(0, len(ids), chunk):
        last = i + chunk >= len(ids)
        runner.prefill(0, ids[i : i + chunk], (sampler, ids) if sample and last else None)


def limit_ms(runner, ids: list[int], chunk: int) -> float:
    """Prefill only `ids` into an empty slot of the engine's own runner (same chunking as the
    worker) and pick the first token: the least a turn can cost."""
    runner.clear(0)
    start = time.perf_counter()
    _prefill(runner, ids, chunk, sample=True)
    return 1000.0 * (time.perf_counter() - start)


def floor_ms(runner, ids: list[int], kept: int, chunk: int) -> float:
    """The same delta prefilled over the kept tokens' K/V (built untimed): pure model compute of a
    cached turn, attention over the history included; the gap to it is the engine's overhead."""
    runner.clear(0)
    _prefill(runner, ids[:kept], chunk, sample=False)
    start = time.perf_counter()
    _prefill(runner, ids[kept:], chunk, sample=True)
    return 1000.0 * (time.perf_counter() - start)


def reply(client: LocalClient, rid: str, msgs: list[Message], tokens: int) -> Done:
    """A generated assistant turn of up to `tokens` tokens, ending as the model ends it (its K/V
    stays in the slot, as in a real chat)."""
    done = client.run(Chat(rid, tuple(msgs), SamplingParams(max_tokens=tokens)))[-1]
    assert isinstance(done, Done), done
    return done


def run_turns(lm, system: Message, users: list[Message], cfg, repeats: int, reply_tokens: int, bare) -> list[dict]:
    """Each turn: the cached worker answers (≈80 generated tokens, fed back as history); the
    uncached worker, the limit and the floor are timed on exactly the same messages."""
    cached = LocalClient(lm, cfg)
    uncached = LocalClient(lm, WorkerConfig(cache_mode="off", runner=cfg.runner))
    msgs, rows = [system], []
    for t, user in enumerate(users):
        msgs.append(user)
        on = reply(cached, f"on{t}", msgs, reply_tokens)
        prompt = lm.template.prompt_ids(msgs)
        kept = on.stats.cached_tokens
        offs, lims, floors = [], [], []
        for r in range(repeats):  # interleaved, so machine noise hits all of them alike
            offs.append(ttft(uncached, f"off{t}.{r}", msgs).stats.ttft_ms)
            lims.append(limit_ms(bare, prompt[kept:], cfg.prefill_chunk))
            floors.append(floor_ms(bare, prompt, kept, cfg.prefill_chunk))
        rows.append(
            dict(turn=t + 1, input=on.stats.input_tokens, cached=kept, kind=on.stats.kind, cached_ms=on.stats.ttft_ms,
                 uncached_ms=statistics.median(offs), limit_ms=statistics.median(lims), floor_ms=statistics.median(floors),
                 decode_tok_s=on.stats.tok_s)
        )
        print(json.dumps(rows[-1]), flush=True)
        msgs.append(Message("assistant", on.text))
    return rows


def long_variant(lm, cfg, history_tokens: int, repeats: int, reply_tokens: int) -> dict:
    """≈history_tokens of conversation (older turns scripted and prefilled, the last reply
    generated), then the next turn timed with the cache and without it."""
    turns = max(2, round((history_tokens - 300) / 140) + 1)
    requests = conversation(lm, turns)
    cached = LocalClient(lm, cfg)
    uncached = LocalClient(lm, WorkerConfig(cache_mode="off", runner=cfg.runner))
    answer = reply(cached, "warm", requests[-2], reply_tokens)
    last = requests[-2] + [Message("assistant", answer.text), requests[-1][-1]]
    on = ttft(cached, "long-on", last)
    offs = [ttft(uncached, f"long-off{r}", last).stats.ttft_ms for r in range(repeats)]
    history = len(lm.template.prompt_ids(last[:-1]))
    return dict(history_tokens=history, input=on.stats.input_tokens, cached=on.stats.cached_tokens, cached_ms=on.stats.ttft_ms,
                uncached_ms=statistics.median(offs))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--quick", action="store_true", help="4 turns, ≈1,500 tokens long variant, 1 repeat")
    p.add_argument("--model", default="default")
    p.add_argument("--dtype", default="auto", help="auto (the app's default: bfloat16 where the CPU has it), float32, bfloat16")
    p.add_argument("--runner", default="auto", choices=RUNNERS, help="the engine's model runner (default: auto, as the app)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    lm = load_model(ModelSpec(args.model, args.dtype))
    cfg = WorkerConfig(num_slots=2, runner=args.runner)
    turns, history, repeats = (4, 1500, 1) if args.quick else (8, 4000, 3)
    requests = conversation(lm, turns)
    system, users = requests[0][0], [r[-1] for r in requests]
    ttft(LocalClient(lm, cfg), "warmup", requests[0])  # first-call overheads out of the way
    bare = make_runner(lm, WorkerConfig(num_slots=1, runner=args.runner))  # one slot for the limit and the floor
    rows = run_turns(lm, system, users, cfg, repeats, 80, bare)
    long = long_variant(lm, cfg, history, repeats, reply_tokens=80)
    print(json.dumps({"long": long}), flush=True)
    decode = statistics.median(r["decode_tok_s"] for r in rows)
    last = rows[-1]
    print(json.dumps({
        "model": lm.name, "dtype": lm.dtype, "runner": type(bare).__name__, "threads": args.threads,
        "quick": args.quick, "turns": [r["turn"] for r in rows],
        "input_tokens": [r["input"] for r in rows],
        "cached_tokens": [r["cached"] for r in rows],
        "ttft_cached_ms": [round(r["cached_ms"], 1) for r in rows],
        "ttft_uncached_ms": [round(r["uncached_ms"], 1) for r in rows],
        "limit_ms": [round(r["limit_ms"], 1) for r in rows],
        "floor_ms": [round(r["floor_ms"], 1) for r in rows],
        "speedup_last": round(last["uncached_ms"] / last["cached_ms"], 2),
        "over_limit_last": round(last["cached_ms"] / last["limit_ms"], 3),
        "over_floor_last": round(last["cached_ms"] / last["floor_ms"], 3),
        "long_history_tokens": long["history_tokens"],
        "ttft_long_cached_ms": round(long["cached_ms"], 1),
        "ttft_long_uncached_ms": round(long["uncached_ms"], 1),
        "speedup_long": round(long["uncached_ms"] / long["cached_ms"], 2),
        "decode_tok_s": round(decode, 2),
    }))


if __name__ == "__main__":
    main()
