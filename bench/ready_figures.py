"""A later start of the embedded model, measured (issue 23 §3): `ready_s_default` is a fresh process
to its first token, median of a few (bench/ready_probe.py runs the worker as the app does); the
first start, in an empty cache, on request. Used by bench/models.py (--ready N, --first)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

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


def ready_figures(runs: int, first: bool = False) -> dict:
    """The keys bench/models.py adds to its JSON line."""
    out = ready_s_default(runs) if runs else {}
    return out | (ready_first_s() if first else {})
