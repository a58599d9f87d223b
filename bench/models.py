"""Models on this machine (issue 23). For now one part: the readiness check's choices for this
machine (hardware.probe → readiness.decide), each with its reason; a later start of the embedded
model (`ready_s_default`: a fresh process to its first token, median of a few, bench/ready_probe.py).
The GGUF memory/speed figures are to come.

    python -m bench.models            # a table of the choices, then the JSON line
    python -m bench.models --no-gpu   # without the GPU child (facts from /proc only)
    python -m bench.models --ready 5  # five later starts of the embedded model (0: none)
    python -m bench.models --first    # also a first start, in an empty cache (converts the GGUF)

Last line: JSON {"machine": {...}, "facts": {...}, "readiness": {choice: {"value", "reason"}}}."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.machine import machine
from desktop.model.default_model import cache_root
from desktop.model.hardware import probe
from desktop.workers.readiness import decide


def readiness(gpus: bool = True) -> dict:
    """{"facts": the probe's facts, "readiness": the choices} for this machine (nothing stored)."""
    facts = probe(cache_root(), gpus=gpus)
    return {"facts": facts.to_json(), "readiness": decide(facts).to_json()}


ROOT = Path(__file__).resolve().parents[1]


def ready_start(root: Path = ROOT, cache: str | None = None) -> dict:
    """One later start of the embedded model in a fresh process (the code under `root`): seconds
    from starting that process to each stage the worker reports, to ready and to the first token.
    `cache`: the Omnidesk cache folder to use (an empty one: a first start, which converts)."""
    env = {**os.environ, "PYTHONPATH": str(root), "HF_HUB_OFFLINE": "1"}
    if cache is not None:
        env["OMNIDESK_CACHE_DIR"] = cache
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "ready_probe.py"), repr(t0)], cwd=root, env=env,
                         capture_output=True, text=True, timeout=600)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode or not lines:
        raise RuntimeError(f"the probe failed ({out.returncode}): {out.stderr[-2000:]}")
    probe = json.loads(lines[-1])
    if probe["error"]:
        raise RuntimeError(f"the worker failed: {probe['error']}")
    stamps: dict[str, float] = {}
    for name, at in probe["stages"]:  # "Starting…" twice from a child: its process up, then torch imported
        stamps[name if name not in stamps else f"{name} (again)"] = at - t0
    return {"python_s": probe["started"] - t0, "host_imports_s": probe["imported"] - probe["started"],
            "stages_s": {k: round(v, 3) for k, v in stamps.items()}, "ready_s": stamps["ready"],
            "first_token_s": stamps["first token"], "ttft_s": stamps["first token"] - (probe["asked"] - t0),
            "worker_cpu_s": probe.get("worker_cpu_s")}


def ready_s_default(runs: int = 3, root: Path = ROOT) -> dict:
    """`ready_s_default`: a later start of the embedded model, process start to first token, the
    median of `runs` fresh processes (the converted model is made first, if missing, outside the count)."""
    ready_start(root)  # a warm page cache and a converted model, as on any later start
    starts = [ready_start(root) for _ in range(runs)]
    med = lambda key: round(statistics.median(s[key] for s in starts), 3)  # noqa: E731
    cpu = [s["worker_cpu_s"] for s in starts if s.get("worker_cpu_s") is not None]
    return {"ready_s_default": med("first_token_s"), "ready_s_to_idle": med("ready_s"), "ttft_s_first_reply": med("ttft_s"),
            "worker_cpu_s": round(statistics.median(cpu), 2) if cpu else None,
            "ready_runs": [{k: (round(v, 3) if isinstance(v, float) else v) for k, v in s.items()} for s in starts],
            "load_avg": os.getloadavg()[0]}


def ready_first_s(root: Path = ROOT) -> dict:
    """The first start (conversion of the embedded GGUF and packing included) in an empty cache,
    then a later start from that cache; about a minute and 1 GB of temporary disk."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="omnidesk-first-") as cache:
        first, later = ready_start(root, cache), ready_start(root, cache)
    return {"ready_s_first_start": round(first["first_token_s"], 3), "ready_s_after_first": round(later["first_token_s"], 3),
            "first_start_stages_s": first["stages_s"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-gpu", action="store_true", help="do not ask the GPUs (no CUDA child process)")
    parser.add_argument("--ready", type=int, default=3, metavar="N", help="later starts of the embedded model (0: none)")
    parser.add_argument("--first", action="store_true", help="also a first start in an empty cache (a minute, 1 GB)")
    args = parser.parse_args()
    out = readiness(gpus=not args.no_gpu)
    if args.first:
        out.update(ready_first_s())
        print(f"  first start: {out['ready_s_first_start']} s to the first token (then {out['ready_s_after_first']} s)")
    if args.ready:
        out.update(ready_s_default(args.ready))
        print(f"  ready_s_default: {out['ready_s_default']} s to the first token (median of {args.ready}; "
              f"ready {out['ready_s_to_idle']} s, first reply's TTFT {out['ttft_s_first_reply']} s)")
    for name, choice in out["readiness"].items():
        if isinstance(choice, dict):
            print(f"{name:>16}: {choice['value']!s:<10} {choice['reason']}")
    print(json.dumps({"machine": machine(), **out}))


if __name__ == "__main__":
    main()
