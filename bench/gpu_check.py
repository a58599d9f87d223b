"""The GPU check of issue 25, as one script for a short loan of a GPU machine: every step runs in
its own process (a step that fails or hangs costs only itself), under one overall deadline, and
each step's figures are written to OUT/gpu_check.json as soon as it ends, so a run cut short
still brings back what it measured.

Steps (cuda):
  env        the GPU, torch and transformers versions
  tests      the CUDA tests (skipped on a machine without CUDA): the static runner's captured
             graphs equal eager steps, the cache invariant through the worker on CUDA
  decode_8b  bench/decode.py --device cuda --model 8b-random: batch 1/8/32 × 128 tokens, static
             vs transformers runner, and a 70-token turn over a 17k history cached vs uncached,
             with a profile of a batch-1 decode and of the cached turn (OUT/profile_8b.txt)
  agree_8b   bench/agreement.py: bf16 greedy agreement cached vs uncached, 20 random chats
  decode_1b  the same decode bench at Llama 3.2 1B's shape
  agree_1b32 the agreement at 1B shape in float32 (the control: should agree everywhere)
  attention  bench/attention_gpu.py: the attention kernels at the runner's shapes, side by side
  ttft_8b    a quick re-measure: static runner, batch 1, and the 17k-history TTFT (with profile)

`--device cpu` is the CPU twin: the same steps on `tiny-random` with smaller counts, to check the
script end to end before the GPU time is spent. The last line printed is the JSON of all steps.

    python bench/gpu_check.py --device cuda --tokenizer .gpu/tokenizer --out $OUT --budget-s 420
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import cpu_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def steps(device: str, tok: list[str], out: Path) -> list[tuple[str, list[str], int]]:
    """(name, argv, seconds it may take at most) in the order they run."""
    py = [sys.executable]
    tests = py + ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "-W", "ignore::pytest.PytestConfigWarning",
                  "tests/workers/test_cuda_worker.py", "tests/workers/test_static_runner.py"]
    if device == "cuda":
        return [
            ("tests", tests, 150),
            ("decode_8b", py + ["bench/decode.py", "--device", "cuda", "--model", "8b-random", *tok, "--kv-budget-gb", "16",
                                "--profile", str(out / "profile_8b.txt")], 240),
            ("agree_8b", py + ["bench/agreement.py", "--device", "cuda", "--model", "8b-random", *tok, "--dtype", "bfloat16",
                               "--conversations", "20", "--turns", "3", "--tokens", "24"], 150),
            ("decode_1b", py + ["bench/decode.py", "--device", "cuda", "--model", "1b-random", *tok, "--kv-budget-gb", "16"], 150),
            ("agree_1b32", py + ["bench/agreement.py", "--device", "cuda", "--model", "1b-random", *tok, "--dtype", "float32",
                                 "--conversations", "20", "--turns", "3", "--tokens", "24"], 120),
            ("attention", py + ["bench/attention_gpu.py"], 90),
            ("ttft_8b", py + ["bench/decode.py", "--device", "cuda", "--model", "8b-random", *tok, "--kv-budget-gb", "16",
                              "--runner", "static", "--batches", "1", "--tokens", "32",
                              "--profile", str(out / "profile_ttft_8b.txt")], 150),
        ]
    return [
        ("tests", tests, 300),
        ("decode_tiny", py + ["bench/decode.py", "--model", "tiny-random", *tok, "--quick", "--ttft-history", "1500",
                              "--profile", str(out / "profile_tiny.txt")], 300),
        ("agree_tiny", py + ["bench/agreement.py", "--model", "tiny-random", *tok, "--dtype", "bfloat16",
                             "--conversations", "4", "--turns", "2", "--tokens", "12"], 300),
    ]


def environment() -> dict:
    import torch
    import transformers

    row = dict(python=platform.python_version(), torch=torch.__version__, transformers=transformers.__version__,
               cuda=torch.version.cuda, cuda_available=torch.cuda.is_available(), cpu=cpu_model())
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        row.update(gpu=p.name, gpu_mem_gib=round(p.total_memory / 2**30, 1), sms=p.multi_processor_count)
    return row


def last_json(text: str) -> dict | None:
    for line in reversed(text.strip().splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def run_step(name: str, argv: list[str], limit: float, out: Path) -> dict:
    start = time.perf_counter()
    log = out / f"{name}.log"
    with log.open("w") as f:
        try:
            proc = subprocess.run(argv, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, timeout=limit,
                                  env={**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1"})
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    text = log.read_text(errors="replace")
    row = {"rc": rc, "seconds": round(time.perf_counter() - start, 1)}
    if name == "tests":
        row["summary"] = next((line for line in reversed(text.splitlines()) if " passed" in line or " failed" in line
                               or " skipped" in line or "error" in line.lower()), text[-300:])
    else:
        row["result"] = last_json(text)
    if rc != 0:
        row["tail"] = text[-1500:]
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--tokenizer", default=None, help="folder with the default model's tokenizer (random shapes)")
    p.add_argument("--out", type=Path, default=Path("gpu_check_out"))
    p.add_argument("--budget-s", type=float, default=480, help="all steps together; a step that cannot start with 30 s left is skipped")
    p.add_argument("--only", default=None, help="comma-separated step names to run")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    deadline = time.perf_counter() + args.budget_s
    tok = ["--tokenizer", args.tokenizer] if args.tokenizer else []
    report: dict = {"env": environment()}
    print(json.dumps(report["env"]), flush=True)
    wanted = set(args.only.split(",")) if args.only else None
    for name, argv, limit in steps(args.device, tok, args.out):
        if wanted and name not in wanted:
            continue
        left = deadline - time.perf_counter()
        if left < 30:
            report[name] = {"rc": "skipped", "why": f"{left:.0f} s left of the budget"}
        else:
            report[name] = run_step(name, argv, min(limit, left), args.out)
        print(json.dumps({name: report[name]})[:3000], flush=True)
        (args.out / "gpu_check.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
