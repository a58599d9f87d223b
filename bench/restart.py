"""The next turn of a long conversation after a restart (issue 22): KV in RAM, restored from a
disk snapshot, or prefilled again, side by side, for 1,000 / 4,000 / 8,000 tokens of history on
the embedded default model.

Per size, one worker (the disk tier on, over a fresh folder) builds the conversation quickly:
long user messages and short scripted replies, prefilled in 2,048-token chunks, then a reply it
generates. RAM: `--repeats` follow-ups on that worker, each a short question (a 4-token reply
fed back as history): the TTFT of a turn whose history is in a slot. Then the worker shuts down
as the app's quit does (`Shutdown`), which writes its snapshot: its size per token and the time
from the shutdown to the file's rename (`snapshot_write_ms`). Restore: per repeat a new worker
(empty slots, a new KV pool) over a copy of that folder, the OS page cache dropped for the files
(`--page-cache drop`, the default: the read comes from the disk, as after a reboot; `keep`: as
right after a quit), answers one more question: the prefill's `kind` must be "disk". Re-prefill:
the same request on a cold worker with the cache and the disk tier off. Each new worker first
answers an unrelated one-line chat (first-call costs out of the way; `restart_worker_ms` is that
start, where a restore done ahead of the request would show; a new worker reads its newest
snapshots ahead into the page cache on a thread (kv_disk/prefetch.py), so with `drop` the
restore reads what that read-ahead brought back meanwhile). TTFTs are the worker's own (submit
→ first token), medians over the repeats; the app's worker config otherwise.

A build without the disk tier, or one that wrote no snapshot at shutdown, reports `restore`
figures as null with a `note`. The last line is JSON with the CPU and `targets` (issue 22, on
2 cores: `restore_speedup_4k` ≥ 10, `restore_over_ram_4k` ≤ 2.0)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from desktop.model.loader import LoadedModel, ModelSpec, load_model  # noqa: E402
from desktop.model.messages import Message  # noqa: E402
from desktop.model.params import SamplingParams  # noqa: E402
from desktop.protocol import Chat, Done, ErrorEvent, MatchKind, PrefillDone  # noqa: E402
from desktop.workers.config import RUNNERS, WorkerConfig  # noqa: E402
from filler import prose  # noqa: E402
from machine import machine  # noqa: E402
from served_worker import ServedWorker  # noqa: E402
from snapshot_watch import SnapshotWatch, copy_snapshots, drop_page_cache, snapshots  # noqa: E402

HAS_DISK = hasattr(MatchKind, "DISK")
BUILD_CHUNK = 2048  # the history is built in big chunks: only the next turn is timed
USER_TOKENS = 900  # the history's user messages: long, so that it is built in few turns
SCRIPTED_REPLY = 40  # the history's assistant messages (scripted), tokens
REPLY = 16  # the last reply of the history, generated
FOLLOW_UP = 4  # the RAM follow-ups' replies (fed back as history)
QUESTIONS = ("Can you sum that up in one sentence?", "What would you do first, and why?",
             "Which part of this is the hardest to get right?", "Is there a cheaper way to do it?",
             "What should I avoid doing here?", "How long would all of this take me?")
GREEDY = dict(temperature=0.0)


def label(size: int) -> str:
    return f"{size // 1000}k" if size % 1000 == 0 else str(size)


def ask(worker: ServedWorker, rid: str, msgs: list[Message], conversation: str, max_tokens: int) -> dict:
    """One chat turn: the worker's TTFT and match, the reply, and the client's own TTFT (submit →
    PrefillDone here, for a check)."""
    cmd = Chat(rid, tuple(msgs), SamplingParams(max_tokens=max_tokens, **GREEDY), conversation=conversation)
    events = worker.run(cmd)
    t0, done = events[0][0], events[-1][1]
    if isinstance(done, ErrorEvent):
        raise SystemExit(f"{rid} failed: {done.message}")
    assert isinstance(done, Done), done
    prefill = next((at for at, e in events if isinstance(e, PrefillDone)), None)
    s = done.stats
    return dict(ttft_ms=s.ttft_ms, client_ttft_ms=None if prefill is None else 1000 * (prefill - t0), kind=str(s.kind),
                input=s.input_tokens, cached=s.cached_tokens, generated=s.generated_tokens, text=done.text, done_at=events[-1][0])


def warm_up(worker: ServedWorker) -> None:
    ask(worker, "warm-up", [Message("system", "Warm-up."), Message("user", "Say hi.")], "warmup", 1)


def history(lm: LoadedModel, tokens: int) -> list[Message]:
    """System + long user / short assistant pairs ending with a user message, ≈`tokens` in all
    with the reply still to come."""
    tok = lm.template.tokenize
    msgs = [Message("system", "You are a helpful assistant. Answer clearly and briefly.")]
    left, k = tokens - REPLY - 30, 0
    while left > 0:
        user = min(USER_TOKENS, max(left - SCRIPTED_REPLY, 20))
        msgs.append(Message("user", prose(tok, user, 11 * k + 1)))
        left -= user + 10
        if left > SCRIPTED_REPLY + 40:
            msgs.append(Message("assistant", prose(tok, SCRIPTED_REPLY, 11 * k + 5)))
            left -= SCRIPTED_REPLY + 10
        else:
            break
        k += 1
    short = tokens - REPLY - len(lm.template.prompt_ids(msgs))
    if short > 0:  # the per-message markers were guessed: make up the difference in the last message
        msgs[-1] = Message("user", msgs[-1].content + " " + prose(tok, short, 97))
    return msgs


def median(rows: list[dict], key: str) -> float | None:
    values = [r[key] for r in rows if r.get(key) is not None]
    return round(statistics.median(values), 1) if values else None


def one_size(lm: LoadedModel, size: int, args: argparse.Namespace, cold: ServedWorker) -> dict:
    root = Path(args.kv_dir) / label(size)
    live, pristine = root / "live", root / "pristine"
    live.mkdir(parents=True, exist_ok=True)
    for e in snapshots(live):
        e.path.unlink()
    conv = f"bench{label(size)}"
    app = WorkerConfig(runner=args.runner, kv_dir=str(live))
    first = ServedWorker(lm, dataclasses.replace(app, prefill_chunk=BUILD_CHUNK, prefill_budget=BUILD_CHUNK), "build")
    warm_up(first)
    msgs = history(lm, size)
    t = time.perf_counter()
    built = ask(first, f"build-{size}", msgs, conv, REPLY)
    msgs.append(Message("assistant", built["text"]))
    print(f"[{label(size)}] history built: {built['input'] + built['generated']} tokens in {time.perf_counter() - t:.1f} s",
          file=sys.stderr, flush=True)
    ram = []
    for r in range(args.repeats):  # follow-ups, each extending the slot's conversation
        msgs.append(Message("user", QUESTIONS[r % len(QUESTIONS)]))
        ram.append(ask(first, f"ram-{size}-{r}", msgs, conv, FOLLOW_UP))
        msgs.append(Message("assistant", ram[-1]["text"]))
    held = ram[-1]["input"] + ram[-1]["generated"] - 1 if ram else built["input"] + built["generated"] - 1
    watch = SnapshotWatch(live).start()
    t0 = time.perf_counter()
    first.close()
    time.sleep(0.05)
    watch.stop()
    written = watch.written_after(t0, conv)
    files = snapshots(live, conv)
    out = dict(size=size, history_tokens=len(lm.template.prompt_ids(msgs)), ram=ram)
    note = None
    if not HAS_DISK:
        note = "no disk tier in this build (MatchKind has no DISK)"
    elif not files:
        note = "no snapshot was written at shutdown"
    if files:
        biggest = max(files, key=lambda e: e.size)
        out.update(snapshot_bytes=biggest.size, snapshot_tokens=held, snapshot_bytes_per_token=round(biggest.size / held, 1),
                   snapshot_write_ms=round(1000 * written[-1][0], 1) if written else None,
                   snapshot_written_before_shutdown=not written)
        copy_snapshots(live, pristine)
    rows: dict[str, list[dict]] = {"restore": [], "restore_warm": []}
    ways = {"drop": [("restore", True)], "keep": [("restore", False)], "both": [("restore", True), ("restore_warm", False)]}
    prefill = []
    final = msgs + [Message("user", "One more thing: what is the single most important point of all this?")]
    for r in range(args.repeats):  # interleaved, so that the load of the machine weighs on each alike
        for key, drop in ways[args.page_cache] if files and note is None else []:
            copy_snapshots(pristine, live)
            if drop:
                drop_page_cache(live)
            t = time.perf_counter()
            fresh = ServedWorker(lm, app, "restart")  # a new worker over the same folder: the restart
            warm_up(fresh)
            up_ms = 1000 * (time.perf_counter() - t)  # what a restore done ahead of the request would hide
            rows[key].append(dict(ask(fresh, f"{key}-{size}-{r}", final, conv, 1), start_ms=up_ms))
            fresh.close()
        prefill.append(ask(cold, f"prefill-{size}-{r}", final, conv, 1))
    restore, restore_warm = rows["restore"], rows["restore_warm"]
    kinds = {row["kind"] for row in restore + restore_warm}
    if restore and kinds != {"disk"}:
        note = f"the restart did not restore from disk (prefill kind {', '.join(sorted(kinds))})"
    out.update(restore=restore, restore_warm=restore_warm, prefill=prefill, note=note,
               ttft_ram_ms=median(ram, "ttft_ms"), ttft_prefill_ms=median(prefill, "ttft_ms"),
               ttft_restore_ms=median(restore, "ttft_ms") if note is None else None,
               ttft_restore_warm_ms=median(restore_warm, "ttft_ms") if note is None else None,
               restored_tokens=median(restore, "cached") if note is None else None,
               restart_worker_ms=median(restore, "start_ms") if note is None else None)
    return out


def summary(cases: list[dict], args: argparse.Namespace, lm: LoadedModel) -> dict:
    by = {label(c["size"]): c for c in cases}
    pick = lambda key: {k: c.get(key) for k, c in by.items()}  # noqa: E731
    four = by.get("4k", {})
    ratio = lambda a, b: round(a / b, 2) if a and b else None  # noqa: E731
    per_token = [c["snapshot_bytes_per_token"] for c in cases if c.get("snapshot_bytes_per_token")]
    out = {
        "model": lm.name, "dtype": lm.dtype, "threads": args.threads, "runner": args.runner, "repeats": args.repeats,
        "page_cache": args.page_cache, "disk_tier": HAS_DISK,
        "history_tokens": pick("history_tokens"),
        "ttft_ram_ms": pick("ttft_ram_ms"), "ttft_restore_ms": pick("ttft_restore_ms"),
        "ttft_prefill_ms": pick("ttft_prefill_ms"), "ttft_restore_warm_cache_ms": pick("ttft_restore_warm_ms"),
        "restored_tokens": pick("restored_tokens"), "restart_worker_ms": pick("restart_worker_ms"),
        "restore_speedup": {k: ratio(c["ttft_prefill_ms"], c["ttft_restore_ms"]) for k, c in by.items()},
        "restore_over_ram": {k: ratio(c["ttft_restore_ms"], c["ttft_ram_ms"]) for k, c in by.items()},
        "restore_speedup_4k": ratio(four.get("ttft_prefill_ms"), four.get("ttft_restore_ms")),
        "restore_over_ram_4k": ratio(four.get("ttft_restore_ms"), four.get("ttft_ram_ms")),
        "snapshot_bytes_per_token": round(statistics.median(per_token), 1) if per_token else None,
        "kv_bytes_per_token": lm.kv_bytes_per_token,
        "snapshot_write_ms": pick("snapshot_write_ms"), "snapshot_write_ms_4k": four.get("snapshot_write_ms"),
        "snapshot_bytes": pick("snapshot_bytes"),
        "notes": {k: c["note"] for k, c in by.items() if c.get("note")},
    }
    if out["notes"] and all(c.get("ttft_restore_ms") is None for c in cases):
        out["restore"] = None
        out["note"] = next(iter(out["notes"].values()))
    out.update(machine())
    out["load_avg"] = round(os.getloadavg()[0], 2)
    out["targets"] = {
        "restore_speedup_4k": None if out["restore_speedup_4k"] is None else out["restore_speedup_4k"] >= 10,
        "restore_over_ram_4k": None if out["restore_over_ram_4k"] is None else out["restore_over_ram_4k"] <= 2.0,
    }
    return out


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,4000,8000", help="history tokens, comma-separated")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--model", default="default", help="default (the embedded model), tiny (a smoke test), or a folder")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--runner", default="auto", choices=RUNNERS)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--page-cache", default="drop", choices=["drop", "keep", "both"],
                    help="before each restore: drop the snapshot files from the OS page cache (as after a reboot), "
                         "keep them (as right after a quit), or time both")
    ap.add_argument("--kv-dir", default="", help="the snapshot folder (default: a temporary one, removed after)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = parse(argv)
    torch.set_num_threads(args.threads)
    lm = load_model(ModelSpec(args.model, args.dtype))
    sizes = [int(s) for s in args.sizes.split(",") if s]
    too_long = [s for s in sizes if s + 64 > lm.context_length]
    if too_long:
        raise SystemExit(f"History of {too_long[0]:,} tokens leaves no room for a turn in "
                         f"{lm.name}'s {lm.context_length:,}-token window.")
    with tempfile.TemporaryDirectory(prefix="omnidesk-bench-kv-") as tmp:
        args.kv_dir = args.kv_dir or tmp
        cold = ServedWorker(lm, WorkerConfig(runner=args.runner, cache_mode="off"), "cold")  # re-prefills every time
        warm_up(cold)
        cases = []
        for size in sizes:
            case = one_size(lm, size, args, cold)
            cases.append(case)
            print(json.dumps({k: v for k, v in case.items() if k not in ("ram", "restore", "restore_warm", "prefill")}),
                  file=sys.stderr, flush=True)
        cold.close()
    out = summary(cases, args, lm)
    fields = ("ttft_ms", "client_ttft_ms", "kind", "input", "cached", "start_ms")
    out["cases"] = [{k: [{f: r[f] for f in fields if f in r} for r in v] if isinstance(v, list) else v for k, v in c.items()}
                    for c in cases]
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
