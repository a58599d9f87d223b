"""GGUF files at llama.cpp's memory and speed (issue 23 §2): a random-init Llama of 1B shape written
as Q4_0, Q4_K_M and Q8_0 (tests/support/gguf_files.py; cached between runs), plus the embedded
model's own GGUF, each served two ways in one run:
  - ours: the app's route (workers/factory.make_hosts → the local llama.cpp worker → the gateway),
    timed at the gateway as a chat client sees it;
  - llama.cpp: the same xllamacpp server with llama.cpp's own defaults (mmap, its RAM prompt
    cache), asked over HTTP directly;
  - ours_child_direct: our worker's own llama.cpp child asked over HTTP directly (what the host
    and gateway cost, apart from the server's settings).
For each: resident memory of the llama.cpp child after load and after use ÷ the file's size;
decode tok/s at batch 1 and 4 (wall clock after the first token); prefill tok/s over a ~512-token
prompt (prompt tokens ÷ time to first token). `--torch` adds the torch runner's resident memory
for the Q4_0 file (dequantised: slow to load).

    python -m bench.gguf_figures [--quants Q4_0,Q4_K_M,Q8_0] [--no-embedded] [--torch]

Last line: JSON with rss_over_file_max, decode_vs_llamacpp_q4km, prefill_vs_llamacpp_q4km and
the figures per file. bench/models.py prints the same keys in its own last line."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil

from bench.machine import machine
from desktop.model.default_model import cache_root, embedded_default_gguf
from desktop.model.gguf_facts import read_facts
from desktop.model.loader import ModelSpec
from desktop.workers.config import WorkerConfig
from desktop.workers.factory import make_hosts
from desktop.workers.remote.llama_server import LlamaServer

QUANTS = ("Q4_0", "Q4_K_M", "Q8_0")
SLOTS, POOL = 4, 2048  # both servers: 4 slots sharing one 2,048-token KV pool
DECODE_1, DECODE_4 = 12, 6  # tokens per reply: random 1B weights decode slowly on 2 cores
PROMPT_WORDS = 500  # ≈ 512 tokens with the tag and the template


def files(quants: tuple[str, ...], embedded: bool) -> dict[str, Path]:
    """name → GGUF file; the 1B files are written once into the cache folder."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
    from gguf_files import ONE_B, embedded_vocab, write_llama

    folder = cache_root() / "bench-gguf"
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}
    vocab = None
    for q in quants:
        path = folder / f"random-1b-{q}.gguf"
        if not path.exists():
            vocab = vocab or embedded_vocab()
            t = time.perf_counter()
            write_llama(path.with_suffix(".part"), q, ONE_B, vocab).rename(path)
            print(f"wrote {path.name} ({path.stat().st_size / 1e6:,.0f} MB) in {time.perf_counter() - t:.0f} s", flush=True)
        out[f"1b-{q}"] = path
    if embedded:
        out["embedded"] = embedded_default_gguf()
    return out


WORDS = ("the", "cat", "sat", "on", "a", "mat", "and", "we", "saw", "it", "from", "our", "house", "by", "sea")


def prompt(tag: str, words: int = PROMPT_WORDS) -> list[dict]:
    """A user message of `words` common words (one token each) after a tag that keeps it apart."""
    return [{"role": "user", "content": tag + ": " + " ".join(WORDS[i % len(WORDS)] for i in range(words))}]


def rss(pid: int | None) -> int:
    return psutil.Process(pid).memory_info().rss if pid else 0


# ---------------------------------------------------------------------------- the two sides

# (start, first token, end, tokens generated, prompt tokens). "First token": when the server says
# the first token is sampled, whether or not it is text (random weights make many tokens that are
# not whole characters, so "first text" would shift the decode window).
Record = tuple[float, float, float, int, int]


class Ours:
    """The app's route: the worker the factory makes for a .gguf file, behind the gateway."""

    def __init__(self, path: Path, threads: int) -> None:
        from desktop.gateway.gateway import Gateway

        budget = POOL * read_facts(path).kv_bytes_per_token()  # the KV budget that makes the direct server's pool
        (self.host,) = make_hosts(ModelSpec(str(path), "auto", "cpu"),
                                  WorkerConfig(num_slots=SLOTS, kv_budget_bytes=budget), cores=threads)
        self.gw = Gateway([self.host])

    async def start(self) -> None:
        await self.gw.start()
        if not await self.gw.wait_ready(900):
            raise RuntimeError("the llama.cpp worker did not load its model")

    @property
    def pid(self) -> int | None:
        return self.host.pid

    async def one(self, messages: list[dict], tokens: int, slot: int) -> Record:
        from desktop.protocol import ChunkEvent, Done, ErrorEvent, PrefillDone

        start, first, n, prompt_n = time.perf_counter(), 0.0, 0, 0
        async for e in self.gw.chat(messages, {"max_tokens": tokens, "ignore_eos": True, "temperature": 0.0}):
            if isinstance(e, (PrefillDone, ChunkEvent)) and not first:  # the first token was sampled
                first = time.perf_counter()
            if isinstance(e, PrefillDone):
                prompt_n = e.input_tokens
            elif isinstance(e, Done):
                n = e.stats.generated_tokens
            elif isinstance(e, ErrorEvent):
                raise RuntimeError(e.message)
        return start, first or time.perf_counter(), time.perf_counter(), n, prompt_n

    async def close(self) -> None:
        await self.gw.close()


class Direct:
    """llama.cpp with its own defaults (mmap, its RAM prompt cache), asked over HTTP."""

    def __init__(self, path: Path, threads: int, serving: Ours | None = None) -> None:
        """`serving`: ask that worker's own llama.cpp child instead (the host's cost alone)."""
        self.server = None if serving else LlamaServer(str(path), slots=SLOTS, threads=threads, pool=POOL)
        self.serving = serving
        self.client = httpx.AsyncClient(timeout=None)
        self.url = ""

    async def start(self) -> None:
        if self.server is None:
            self.url = self.serving.host.url  # type: ignore[union-attr]
        else:
            self.url = await asyncio.to_thread(self.server.start, 900.0)

    @property
    def pid(self) -> int | None:
        return self.server.pid if self.server is not None else self.serving.pid  # type: ignore[union-attr]

    async def one(self, messages: list[dict], tokens: int, slot: int) -> Record:
        body = {"messages": messages, "max_tokens": tokens, "ignore_eos": True, "temperature": 0.0, "stream": True,
                "stream_options": {"include_usage": True}, "id_slot": slot, "cache_prompt": True}
        start, first, n, prompt_n = time.perf_counter(), 0.0, 0, 0
        async with self.client.stream("POST", self.url + "/v1/chat/completions", json=body) as resp:
            async for line in resp.aiter_lines():
                if not line.startswith("data:") or line.strip() == "data: [DONE]":
                    continue
                obj = json.loads(line[5:])
                if not first:  # the first line comes with the first token sampled (text or not)
                    first = time.perf_counter()
                if obj.get("usage"):
                    n, prompt_n = obj["usage"]["completion_tokens"], obj["usage"]["prompt_tokens"]
        return start, first or time.perf_counter(), time.perf_counter(), n, prompt_n

    async def close(self) -> None:
        await self.client.aclose()
        if self.server is not None:
            self.server.kill()


async def prefill(side, tag: str) -> float:
    start, first, _end, _n, prompt_n = await side.one(prompt(tag), 1, 0)
    return prompt_n / (first - start)


async def decode(side, tag: str, batch: int, tokens: int) -> float:
    """Tokens after each reply's first ÷ the time from the earliest first token to the last end."""
    runs = await asyncio.gather(*(side.one(prompt(f"{tag}{i}", 8), tokens, i) for i in range(batch)))
    first, end = min(r[1] for r in runs), max(r[2] for r in runs)
    return sum(r[3] - 1 for r in runs) / (end - first)


async def compare(path: Path, threads: int, rounds: int) -> dict[str, dict]:
    """Both sides loaded at once, measured in turns (ours, then llama.cpp, for each figure), so a
    load that comes and goes on a shared machine falls on both; the best of `rounds` is kept."""
    ours = Ours(path, threads)
    sides = {"ours": ours, "llamacpp": Direct(path, threads), "ours_child_direct": Direct(path, threads, ours)}
    out: dict[str, dict] = {}
    try:
        for name, side in sides.items():  # one at a time: loading is measured alone
            t = time.perf_counter()
            await side.start()
            out[name] = {"load_s": round(time.perf_counter() - t, 1), "rss": rss(side.pid)}
        for r in range(rounds):
            for figure, run in (("prefill_tok_s", lambda s, t: prefill(s, f"{t}p{r}")),
                                ("decode_b1_tok_s", lambda s, t: decode(s, f"{t}a{r}", 1, DECODE_1)),
                                ("decode_b4_tok_s", lambda s, t: decode(s, f"{t}b{r}", 4, DECODE_4))):
                for name, side in sides.items():  # each side its own prompts: no side reads another's cache
                    value = await run(side, name[0] + name[-1])
                    out[name][figure] = round(max(value, out[name].get(figure, 0.0)), 2)
        for name, side in sides.items():
            out[name]["rss"] = max(out[name]["rss"], rss(side.pid))
    finally:
        for side in sides.values():
            await side.close()
    return out


# ---------------------------------------------------------------------------- the torch runner

def torch_rss(path: Path) -> dict:
    """The torch runner's resident memory for `path` (loaded in a child: dequantised)."""
    code = ("import json, os, sys, time, psutil; t = time.perf_counter();"
            "from desktop.model.loader import load_model, ModelSpec; m = load_model(ModelSpec(sys.argv[1], 'auto', 'cpu'));"
            "print(json.dumps({'load_s': round(time.perf_counter() - t, 1), 'rss': psutil.Process().memory_info().rss}))")
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=1800,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"}, cwd=Path(__file__).resolve().parents[1])
    if done.returncode:
        return {"error": done.stderr.strip().splitlines()[-1][:300] if done.stderr.strip() else f"exit {done.returncode}"}
    got = json.loads(done.stdout.strip().splitlines()[-1])
    return {"load_s": got["load_s"], "rss_over_file": round(got["rss"] / path.stat().st_size, 3)}


# ---------------------------------------------------------------------------- together

def gguf_figures(quants: tuple[str, ...] = QUANTS, embedded: bool = True, torch: bool = False,
                 threads: int | None = None, rounds: int = 1) -> dict:
    """Every figure, and the target keys (rss_over_file_max over the 1B files; the embedded
    model's 98 MB is below the runtime's fixed cost); prints a line per file as it goes."""
    threads = threads or machine()["cores"]
    per: dict[str, dict] = {}
    for name, path in files(quants, embedded).items():
        size = path.stat().st_size
        got = asyncio.run(compare(path, threads, rounds))
        ours, direct = got["ours"], got["llamacpp"]
        got["ours_child_direct"].pop("rss")  # the same process as ours
        kv = min(POOL, read_facts(path).context_length or POOL) * read_facts(path).kv_bytes_per_token()
        for d in (ours, direct):
            d["rss_without_kv_over_file"] = round((d["rss"] - kv) / size, 3)  # the KV pool is the user's budget
            d["rss_over_file"] = round(d.pop("rss") / size, 3)
        kv_mb = kv / 1e6
        per[name] = {"file_mb": round(size / 1e6, 1), "kv_pool_mb": round(kv_mb, 1), "ours": ours, "llamacpp": direct,
                     "ours_child_direct": got["ours_child_direct"]}
        print(f"{name:>12} {size / 1e6:6.0f} MB (+{kv_mb:.0f} MB KV) rss/file ours {ours['rss_over_file']:.2f}, "
              f"llama.cpp defaults {direct['rss_over_file']:.2f} | decode b1 {ours['decode_b1_tok_s']} vs "
              f"{direct['decode_b1_tok_s']}, b4 {ours['decode_b4_tok_s']} vs {direct['decode_b4_tok_s']} | prefill "
              f"{ours['prefill_tok_s']} vs {direct['prefill_tok_s']} tok/s", flush=True)
    if torch and "1b-Q4_0" in per:
        per["1b-Q4_0"]["torch"] = torch_rss(files(("Q4_0",), False)["1b-Q4_0"])
    big = [f for n, f in per.items() if n.startswith("1b-")] or list(per.values())
    out: dict = {"gguf": per, "gguf_pool_tokens": POOL, "gguf_slots": SLOTS, "gguf_threads": threads,
                 "rss_over_file_max": max(f["ours"]["rss_over_file"] for f in big),
                 "rss_without_kv_over_file_max": max(f["ours"]["rss_without_kv_over_file"] for f in big)}
    k = per.get("1b-Q4_K_M")
    if k:
        for key, figure in (("decode_vs_llamacpp_q4km", "decode_b1_tok_s"), ("decode_b4_vs_llamacpp_q4km", "decode_b4_tok_s"),
                            ("prefill_vs_llamacpp_q4km", "prefill_tok_s")):
            out[key] = round(k["ours"][figure] / k["llamacpp"][figure], 3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quants", default=",".join(QUANTS))
    ap.add_argument("--no-embedded", action="store_true")
    ap.add_argument("--torch", action="store_true", help="also the torch runner's memory for Q4_0 (slow)")
    ap.add_argument("--rounds", type=int, default=1, help="measure each figure this many times, keep the best")
    a = ap.parse_args()
    out = gguf_figures(tuple(q for q in a.quants.split(",") if q), not a.no_embedded, a.torch, rounds=a.rounds)
    print(json.dumps({"machine": machine(), **out}))


if __name__ == "__main__":
    main()
