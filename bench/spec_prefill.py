"""A voice turn's wait for its first token, with and without the user's words prefilled while they
speak (issue 21): the embedded default model on a thread host behind the gateway, as in a call.

Three sessions with the call's system prompt hear the same turns (bench/call.py's script), turn by
turn, interleaved so that the machine's load falls on all three alike:
- `drafts`: while the "user speaks", each partial (the words so far, a word more each time, the
  last one without its punctuation, as Whisper's partials come) goes in as a draft and is
  prefilled; then the final words and the reply go as one command (Generate with messages);
- `one_trip`: no drafts; the final words and the reply as one command;
- `two_trips`: no drafts; AppendInput then Generate, sent together (the call before issue 21: the
  gateway holds the Generate until the append's Done has come back).
`turn_ttft_ms`: the final words handed to the gateway → the reply's first text; `worker_ttft_ms`:
the reply request's own, from its arrival at the worker (in `two_trips` without the append and
the trip between). Greedy: the three sessions must give the same replies (`replies_equal`). The
last line of `__main__` is JSON."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from call_script import SCRIPT  # noqa: E402
from machine import machine  # noqa: E402
from desktop.gateway.gateway import Gateway  # noqa: E402
from desktop.model.loader import ModelSpec  # noqa: E402
from desktop.model.params import SamplingParams  # noqa: E402
from desktop.protocol import ChunkEvent, Done, ErrorEvent, PrefillDone  # noqa: E402
from desktop.workers.config import WorkerConfig  # noqa: E402
from desktop.workers.thread_host import ThreadHost  # noqa: E402

SYSTEM = "You are a helpful voice assistant. Answer briefly, in plain spoken sentences."
MODES = ("drafts", "one_trip", "two_trips")


def partials(text: str) -> list[str]:
    """What a recogniser hears while `text` is spoken: a word more each time, no final punctuation."""
    words = text.split()
    return [" ".join(words[:n]).rstrip(".,?!") for n in range(1, len(words) + 1)]


async def _drain(stream) -> Done:
    last = None
    async for event in stream:
        last = event
    if isinstance(last, ErrorEvent):
        raise RuntimeError(last.message)
    return last


async def _reply(stream, t0: float) -> tuple[float, str, Done]:
    first, text, done = None, "", None
    async for event in stream:
        if isinstance(event, ChunkEvent):
            first = first if first is not None else time.perf_counter()
            text += event.text_delta
        elif isinstance(event, Done):
            done = event
        elif isinstance(event, ErrorEvent):
            raise RuntimeError(event.message)
    return 1000.0 * ((first or time.perf_counter()) - t0), text, done


async def _turn(gw: Gateway, sid: str, mode: str, text: str, params: SamplingParams) -> dict:
    user = [{"role": "user", "content": text}]
    first_cached = None
    if mode == "drafts":
        for words in partials(text):
            stream = gw.append_input(sid, [{"role": "user", "content": words}], draft=True)
            async for event in stream:
                if isinstance(event, PrefillDone) and first_cached is None:
                    first_cached = event.cached_tokens
    t0 = time.perf_counter()
    if mode == "two_trips":
        appended = gw.append_input(sid, user)
        stream = gw.generate_stream(sid, params)
        await _drain(appended)
    else:
        stream = gw.generate_stream(sid, params, user)
    ttft, reply, done = await _reply(stream, t0)
    drafted = 0 if first_cached is None else max(done.stats.cached_tokens - first_cached, 0)
    return {"ttft_ms": ttft, "worker_ttft_ms": done.stats.ttft_ms, "reply": reply, "new_tokens": done.stats.new_tokens,
            "draft_tokens": drafted}


async def _run(turns: list[str], model: str, dtype: str, threads: int, reply_tokens: int) -> dict:
    gw = Gateway([ThreadHost("w0", ModelSpec(model, dtype), WorkerConfig(num_slots=len(MODES)), threads=threads)])
    await gw.start()
    if not await gw.wait_ready(timeout=600):
        raise RuntimeError("the model did not load")
    try:
        sessions = {mode: await gw.create_session(SYSTEM) for mode in MODES}
        params = SamplingParams(max_tokens=reply_tokens)
        rows = {mode: [] for mode in MODES}
        for text in turns:
            for mode in MODES:
                rows[mode].append(await _turn(gw, sessions[mode], mode, text, params))
    finally:
        await gw.close()
    return rows


def measure(turns: list[str] | None = None, model: str = "default", dtype: str = "auto", threads: int = 1,
            reply_tokens: int = 24) -> dict:
    """Run the three modes over `turns` (bench/call.py's script) and return the figures: per mode
    the turn TTFTs and their p50 and mean, the new tokens the reply prefilled, the tokens the
    drafts prefilled ahead of it; `drafts_over_one_trip` and `one_trip_over_two_trips` (p50s)."""
    import torch

    torch.set_num_threads(threads)
    rows = asyncio.run(_run(list(turns or SCRIPT), model, dtype, threads, reply_tokens))
    out: dict = {**machine(), "threads": threads, "model": model, "dtype": dtype, "turns": len(rows["drafts"]),
                 "reply_tokens": reply_tokens}
    for mode in MODES:
        ttft = [r["ttft_ms"] for r in rows[mode]]
        out[mode] = {"turn_ttft_ms": [round(x, 1) for x in ttft], "turn_ttft_ms_p50": round(statistics.median(ttft), 1),
                     "turn_ttft_ms_mean": round(statistics.fmean(ttft), 1),
                     "worker_ttft_ms_p50": round(statistics.median(r["worker_ttft_ms"] for r in rows[mode]), 1),
                     "new_tokens": [r["new_tokens"] for r in rows[mode]]}
    out["drafts"]["draft_tokens"] = [r["draft_tokens"] for r in rows["drafts"]]
    p50 = {mode: out[mode]["turn_ttft_ms_p50"] for mode in MODES}
    out["drafts_over_one_trip"] = round(p50["drafts"] / p50["one_trip"], 3) if p50["one_trip"] else None
    out["one_trip_over_two_trips"] = round(p50["one_trip"] / p50["two_trips"], 3) if p50["two_trips"] else None
    out["replies_equal"] = all(len({rows[m][i]["reply"] for m in MODES}) == 1 for i in range(len(rows["drafts"])))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="default")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reply-tokens", type=int, default=24)
    ap.add_argument("--turns", type=int, default=len(SCRIPT))
    args = ap.parse_args()
    print(json.dumps(measure(SCRIPT[: args.turns], args.model, args.dtype, args.threads, args.reply_tokens)))


if __name__ == "__main__":
    main()
