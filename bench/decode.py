"""Decode speed of the engine as it is, through the project's own Worker (driven on this thread by
LocalClient, as bench/multiturn.py does), next to the memory-bandwidth bound; and a 70-token
turn's TTFT over a long history with the KV kept vs re-prefilled (issue 9).

Decode, per batch size B: a fresh worker with B slots gets B chats at once (a short system prompt
and a user message of `--prompt-tokens` tokens each, all different), greedy with `ignore_eos`, so
every row decodes exactly `--tokens` tokens. All B are prefilled in the first tick (the prefill
budget is raised so they start together; that tick also runs the first decode step and is not
timed). Timed: every later tick in which nothing is waiting or prefilling (pure decode steps: one
batched forward, sampling, detokenisation, events), less the first two (warm-up of the shapes).
`tok_s` = tokens those steps produced (one per decoding row per step) / their wall time;
`ms_per_step` = the mean step (`ms_per_step_p50` its median, less sensitive to a busy machine). The
bound: bytes the weights read per step (all parameters; an untied input embedding counted as B
rows, not the table) / the memory bandwidth measured by a large tensor copy (read + write) → the
most steps a second → × B tokens. `bound_kv_tok_s` adds the KV read per step at the run's mean
context.

TTFT: a scripted conversation (≈300-token system prompt, 70-token user and ≈80-token assistant
turns) of `--ttft-history` tokens, ending with an assistant reply, is sent once with max_tokens=0
(prefilled into a slot, as the previous turn leaves it); the next request adds a 70-token user
turn: its TTFT is the cached one (match kind `extend`: only the new ≈75 tokens are prefilled). The
same request on a worker with the cache off gives the uncached TTFT (the whole prompt prefilled;
the template's per-message token memo is shared, so tokenising is not what differs). TTFT is the
worker's own figure: command submitted → first token sampled.

`--model 8b-random` (or `1b-random`) builds a random-init Llama of that shape on the GPU (bf16,
no download; bench/random_llama.py) with the default model's tokenizer (`--tokenizer DIR` for a
folder holding tokenizer.json, e.g. copied from the converted default); `tiny-random` is the same
on any device. The last line is JSON."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from bench import random_llama  # noqa: E402
from bench.multiturn import conversation, reply, text_of  # noqa: E402
from desktop.protocol import Chat, Done, ErrorEvent  # noqa: E402
from desktop.errors import ModelLoadError  # noqa: E402
from desktop.model.loader import LoadedModel, ModelSpec, load_model  # noqa: E402
from desktop.model.messages import Message  # noqa: E402
from desktop.model.params import SamplingParams  # noqa: E402
from desktop.workers.config import RUNNERS, WorkerConfig  # noqa: E402
from desktop.workers.local import LocalClient  # noqa: E402

DTYPES = {"auto": "auto", "bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "bfloat16": "bfloat16", "float16": "float16", "float32": "float32"}
SKIP_STEPS = 2  # pure decode steps of each run left out of the timing (first use of the shapes)
TURN_TOKENS = 70  # the timed user turn over the long history

# ----------------------------------------------------------------------------- model and machine

def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def memory_bandwidth(device: torch.device) -> float:
    """Bytes per second of a large tensor copy (read + write counted), the best of several."""
    n = (1 << 30) if device.type == "cuda" else (256 << 20)
    src = torch.ones(n, dtype=torch.uint8, device=device)
    dst = torch.zeros(n, dtype=torch.uint8, device=device)
    best = float("inf")
    for _ in range(10 if device.type == "cuda" else 5):
        sync(device)
        start = time.perf_counter()
        dst.copy_(src)
        sync(device)
        best = min(best, time.perf_counter() - start)
    del src, dst
    return 2 * n / best


def weight_bytes(model, batch: int) -> int:
    """Bytes of weights one decode step at `batch` reads: every parameter once (tied embeddings
    are one tensor, read whole by the LM head); an untied input embedding only its `batch` rows."""
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    emb, head = model.get_input_embeddings(), model.get_output_embeddings()
    if head is None or emb.weight.data_ptr() != head.weight.data_ptr():
        w = emb.weight
        total -= w.numel() * w.element_size() - batch * w.shape[1] * w.element_size()
    return total


# ----------------------------------------------------------------------------- profile

@contextlib.contextmanager
def profiled(path: Path | None, title: str) -> Iterator[None]:
    """Run the block under torch.profiler (CPU and, on a GPU, CUDA activity) and append its
    busiest operators to `path` (by device time, then by host time: syncs and launches show
    there). Without a path, just run the block."""
    if path is None:
        yield
        return
    acts = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available():
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=acts) as prof:
        yield
    table = prof.key_averages()
    with path.open("a") as f:
        f.write(f"\n===== {title}\n")
        if torch.cuda.is_available():
            f.write(table.table(sort_by="self_cuda_time_total", row_limit=25) + "\n")
        f.write(table.table(sort_by="self_cpu_time_total", row_limit=25) + "\n")


# ----------------------------------------------------------------------------- decode

def decode_run(lm: LoadedModel, batch: int, tokens: int, skip: int, prompt_tokens: int = 64, runner: str = "auto") -> dict:
    """B chats at once on a fresh worker; the pure decode steps timed (see the module doc)."""
    cfg = WorkerConfig(num_slots=batch, prefill_budget=1 << 20, runner=runner)  # all rows prefilled in the first tick
    client = LocalClient(lm, cfg)
    worker = client.worker
    params = SamplingParams(max_tokens=tokens, ignore_eos=True)  # temperature 0: greedy
    ids = []
    for i in range(batch):
        msgs = (Message("system", "You are a helpful assistant."), Message("user", text_of(lm, prompt_tokens, 7 + 13 * i)))
        client.submit(Chat(f"d{batch}.{i}", msgs, params))
        ids.append(f"d{batch}.{i}")
    device = lm.model.device
    steps: list[tuple[int, float, int]] = []  # (rows decoding, seconds, context width) per pure decode step
    busy = True
    while busy:
        sched = worker.scheduler
        pure = not sched.waiting and not sched.prefilling and worker.intake.empty() and bool(sched.running)
        rows, width = len(sched.running), max((s.num_kv for s in sched.running.values()), default=0)
        sync(device)
        start = time.perf_counter()
        busy = worker.step()
        sync(device)
        if pure:
            steps.append((rows, time.perf_counter() - start, width))
    dones = [client.events[r][-1] for r in ids]
    for event in dones:
        if not isinstance(event, Done):
            raise SystemExit(f"Batch {batch}: a request failed in the worker: {event}")
    timed = steps[skip:] if len(steps) > skip + 2 else steps
    seconds = sum(s for _, s, _ in timed)
    produced = sum(r for r, _, _ in timed)
    return dict(
        runner=type(worker.runner).__name__, batch=batch, tokens=tokens, prompt_tokens=dones[0].stats.input_tokens,
        generated=sum(d.stats.generated_tokens for d in dones), steps=len(timed),
        tok_s=produced / seconds, ms_per_step=1000.0 * seconds / len(timed),
        ms_per_step_p50=1000.0 * statistics.median(s for _, s, _ in timed),  # robust to a noisy machine
        mean_context=statistics.fmean(w + 1 for _, _, w in timed),
        row_tok_s=statistics.median(d.stats.tok_s for d in dones),
    )


# ----------------------------------------------------------------------------- TTFT

def ttft_pair(lm: LoadedModel, history: int, repeats: int, runner: str = "auto", agree_tokens: int = 32,
              kv_budget: int = WorkerConfig().kv_budget_bytes, profile: Path | None = None) -> dict:
    """A 70-token turn over `history` tokens: cached (kept KV) and uncached (cache off), medians;
    both generate `agree_tokens` greedy tokens, and how many agree (from the first) is reported."""
    turns = max(2, round((history - 300) / 160) + 1)  # a turn ≈ 70 user + 80 assistant + template
    request = conversation(lm, turns, user=TURN_TOKENS)[-1]
    past, turn = request[:-1], request[-1]  # past ends with an assistant reply
    cached_runs, new, long_tok_s = [], [], []
    for r in range(repeats):
        client = LocalClient(lm, WorkerConfig(num_slots=2, runner=runner, kv_budget_bytes=kv_budget))
        reply(client, f"build{r}", past, 0)  # max_tokens=0: prefill the history into a slot
        with profiled(profile if r == repeats - 1 else None, f"the cached turn over a {history}-token history ({runner})"):
            done = reply(client, f"cached{r}", request, agree_tokens)
        cached_ids = list(done.token_ids)
        if done.stats.kind != "extend":
            raise SystemExit(f"The cached turn did not extend the kept history (kind {done.stats.kind!r}).")
        cached_runs.append(done.stats.ttft_ms)
        long_tok_s.append(done.stats.tok_s)
        new.append(done.stats.new_tokens)
        del client
    uncached = LocalClient(lm, WorkerConfig(cache_mode="off", runner=runner, kv_budget_bytes=kv_budget))
    uncached_done = [reply(uncached, f"uncached{r}", request, agree_tokens) for r in range(repeats)]
    uncached_runs = [d.stats.ttft_ms for d in uncached_done]
    plain_ids = list(uncached_done[-1].token_ids)
    agree = next((i for i, (a, b) in enumerate(zip(cached_ids, plain_ids)) if a != b), min(len(cached_ids), len(plain_ids)))
    return dict(
        ttft_history_tokens=len(lm.template.prompt_ids(past)) - len(lm.template.gen_prompt_ids),
        turn_tokens=len(lm.template.tokenize(turn.content)), new_tokens=new[0],
        input_tokens=len(lm.template.prompt_ids(request)),
        ttft_cached_ms=statistics.median(cached_runs), ttft_uncached_ms=statistics.median(uncached_runs),
        cached_runs_ms=[round(x, 1) for x in cached_runs], uncached_runs_ms=[round(x, 1) for x in uncached_runs],
        greedy_agree=agree, greedy_of=max(len(cached_ids), len(plain_ids)),
        decode_tok_s_at_history=statistics.median(long_tok_s),  # the cached reply's own decode, one row over the history
    )


# ----------------------------------------------------------------------------- main

def arguments() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--model", default="default",
                   help='"default" (embedded SmolLM2), a model folder or .gguf, "8b-random" or "1b-random" (cuda only), "tiny-random"')
    p.add_argument("--tokenizer", default=None, help="random shapes: folder with the default model's tokenizer (default: the converted default model)")
    p.add_argument("--kv-budget-gb", type=float, default=None,
                   help="the TTFT workers' KV budget (default: the app's, 4 GiB; a 17k history of an 8B model needs 4 GiB in one pool row)")
    p.add_argument("--dtype", default=None, choices=sorted(DTYPES), help="default: auto, as the app (bfloat16 on cuda and on CPUs with bf16, else float32)")
    p.add_argument("--runner", default="both", choices=["both", *RUNNERS],
                   help="model runner(s); both = static and hf side by side, interleaved per batch size (default)")
    p.add_argument("--batches", default=None, help="batch sizes, comma-separated (default 1,8,32; --quick 1,8)")
    p.add_argument("--tokens", type=int, default=None, help="tokens decoded per sequence (default 128; --quick 32)")
    p.add_argument("--prompt-tokens", type=int, default=64, help="tokens of each decode row's user message (default 64)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--ttft-history", type=int, default=None,
                   help="history tokens for the TTFT pair; 0 skips it (default 17000 on cuda, 2000 on cpu, 1000 with --quick)")
    p.add_argument("--repeats", type=int, default=None, help="TTFT repeats, median reported (default 3 on cuda, 1 on cpu)")
    p.add_argument("--quick", action="store_true", help="batches 1,8 and 32 tokens each")
    p.add_argument("--profile", type=Path, default=None,
                   help="append torch.profiler tables of a batch-1 decode and of the cached long-history turn to this file")
    args = p.parse_args()
    if args.model in random_llama.NEEDS_CUDA and args.device != "cuda":
        p.exit(2, f"--model {args.model} needs --device cuda: it builds a random-init Llama of that shape (≈15 GB in bf16 "
                  "for 8B) on the GPU; on a CPU one step takes seconds and says nothing about the GPU target. "
                  "Use --model default, tiny-random or a small model folder on cpu.\n")
    cuda = args.device == "cuda"
    args.dtype = DTYPES[args.dtype or "auto"]
    args.runners = ["static", "hf"] if args.runner == "both" else [args.runner]
    args.batches = [int(x) for x in (args.batches or ("1,8" if args.quick else "1,8,32")).split(",")]
    args.tokens = args.tokens or (32 if args.quick else 128)
    if args.ttft_history is None:
        args.ttft_history = 17000 if cuda else (1000 if args.quick else 2000)
    args.repeats = args.repeats or (3 if cuda else 1)
    if args.tokens < SKIP_STEPS + 4 or min(args.batches) < 1:
        p.error(f"--tokens must be at least {SKIP_STEPS + 4} and batch sizes at least 1.")
    return args


def load(args: argparse.Namespace) -> LoadedModel:
    if args.device == "cuda" and not torch.cuda.is_available():
        raise ModelLoadError("--device cuda was asked for but CUDA is not available here.")
    if args.model in random_llama.SHAPES:
        return random_llama.build(args.model, args.dtype, args.tokenizer, args.device)
    return load_model(ModelSpec(args.model, args.dtype, args.device))


def main() -> None:
    args = arguments()
    torch.set_num_threads(args.threads)
    try:
        lm = load(args)
    except ModelLoadError as exc:
        raise SystemExit(str(exc)) from None
    device = lm.model.device
    bw = memory_bandwidth(device)
    errors: dict[str, str] = {}  # a part that fails is reported and the others still run (a short GPU loan)

    def attempt(what: str, fn, *a, **kw):
        try:
            return fn(*a, **kw)
        except Exception as exc:  # noqa: BLE001 - reported in the JSON with its traceback's end
            errors[what] = "".join(traceback.format_exception(exc))[-1500:]
            print(json.dumps({"error": what, "detail": errors[what]}), flush=True)
            return None

    for runner in args.runners:
        attempt(f"warmup_{runner}", decode_run, lm, 1, SKIP_STEPS + 4, 0, runner=runner)  # first-call overheads out of the way
    rows: dict[str, dict[int, dict]] = {r: {} for r in args.runners}
    for b in args.batches:
        for runner in args.runners:  # side by side: machine noise hits both alike
            row = attempt(f"decode_{runner}_b{b}", decode_run, lm, b, args.tokens, SKIP_STEPS, args.prompt_tokens, runner)
            if row is None:
                continue
            wb = weight_bytes(lm.model, b)
            kvb = b * row["mean_context"] * lm.kv_bytes_per_token
            row.update(bound_step_ms=1000.0 * wb / bw, bound_tok_s=b * bw / wb, bound_kv_tok_s=b * bw / (wb + kvb))
            row["of_bound"] = row["tok_s"] / row["bound_tok_s"]
            rows[runner][b] = row
            print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
    main_runner = args.runners[0]
    if args.profile:
        with profiled(args.profile, f"decode, batch 1, 32 tokens ({main_runner}, {lm.name}, {lm.dtype})"):
            attempt("profile", decode_run, lm, 1, 32, SKIP_STEPS, args.prompt_tokens, main_runner)
    base = rows.get("hf") if main_runner != "hf" else None
    ttft_row = None
    if args.ttft_history > 0:
        need = args.ttft_history + 2 * TURN_TOKENS + 200
        if need > lm.context_length:
            print(json.dumps({"ttft": f"skipped: a {args.ttft_history}-token history does not fit {lm.name}'s "
                                      f"{lm.context_length}-token context"}), flush=True)
        else:
            budget = int(args.kv_budget_gb * 2**30) if args.kv_budget_gb else WorkerConfig().kv_budget_bytes
            ttft_row = attempt("ttft", ttft_pair, lm, args.ttft_history, args.repeats, main_runner, kv_budget=budget, profile=args.profile)
            if ttft_row is not None:
                print(json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in ttft_row.items()}), flush=True)
    is_17k = ttft_row is not None and 16000 <= ttft_row["ttft_history_tokens"] <= 18000

    def per_batch(key: str, b: int, digits: int = 2, runner: str = main_runner):
        return round(rows[runner][b][key], digits) if b in rows[runner] else None

    def speedup(b: int):
        return round(rows[main_runner][b]["tok_s"] / base[b]["tok_s"], 2) if base and b in base and b in rows[main_runner] else None

    print(json.dumps({
        "device": str(device), "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "model": lm.name, "dtype": lm.dtype, "runner": next((r["runner"] for r in rows[main_runner].values()), None), "threads": args.threads, "quick": args.quick,
        "batches": args.batches, "tokens": args.tokens, "prompt_tokens": args.prompt_tokens, "ignore_eos": True,
        "tok_s_b1": per_batch("tok_s", 1), "tok_s_b8": per_batch("tok_s", 8), "tok_s_b32": per_batch("tok_s", 32),
        "ms_per_step_b1": per_batch("ms_per_step", 1), "ms_per_step_b8": per_batch("ms_per_step", 8),
        "ms_per_step_b32": per_batch("ms_per_step", 32),
        "hf_tok_s_b1": per_batch("tok_s", 1, runner="hf") if base else None,
        "hf_tok_s_b8": per_batch("tok_s", 8, runner="hf") if base else None,
        "hf_tok_s_b32": per_batch("tok_s", 32, runner="hf") if base else None,
        "speedup_b1": speedup(1), "speedup_b8": speedup(8), "speedup_b32": speedup(32),
        "tok_s": {r: {str(b): round(x["tok_s"], 2) for b, x in by.items()} for r, by in rows.items()},
        "ms_per_step_p50": {r: {str(b): round(x["ms_per_step_p50"], 2) for b, x in by.items()} for r, by in rows.items()},
        "mem_bw_gb_s": round(bw / 1e9, 1), "weights_gb": round(weight_bytes(lm.model, 1) / 1e9, 3),
        "bound_step_ms": round(1000.0 * weight_bytes(lm.model, 1) / bw, 3),
        "bound_tok_s": {str(b): round(r["bound_tok_s"], 1) for b, r in rows[main_runner].items()},
        "of_bound": {str(b): round(r["of_bound"], 4) for b, r in rows[main_runner].items()},
        "ttft_17k_cached_ms": round(ttft_row["ttft_cached_ms"], 1) if is_17k else None,
        "ttft_17k_uncached_ms": round(ttft_row["ttft_uncached_ms"], 1) if is_17k else None,
        "ttft_history_tokens": ttft_row["ttft_history_tokens"] if ttft_row else None,
        "ttft_cached_ms": round(ttft_row["ttft_cached_ms"], 1) if ttft_row else None,
        "ttft_uncached_ms": round(ttft_row["ttft_uncached_ms"], 1) if ttft_row else None,
        "greedy_agree_cached_uncached": f"{ttft_row['greedy_agree']}/{ttft_row['greedy_of']}" if ttft_row else None,
        "decode_tok_s_at_history": round(ttft_row["decode_tok_s_at_history"], 1) if ttft_row else None,
        "errors": errors or None,
    }))


if __name__ == "__main__":
    main()
