"""Models on this machine (issue 23). For now one part: the readiness check's choices for this
machine (hardware.probe → readiness.decide), each with its reason. The GGUF memory/speed figures
are to come.

    python -m bench.models            # a table of the choices, then the JSON line
    python -m bench.models --no-gpu   # without the GPU child (facts from /proc only)
    python -m bench.models --ready 5  # five later starts of the embedded model (default 3; 0: none; bench/ready_figures.py)
    python -m bench.models --first    # also a first start, in an empty cache (converts the GGUF; a minute)
    python -m bench.models --gguf     # and GGUF files at llama.cpp's memory and speed (bench/gguf_figures.py; minutes)

Last line: JSON {"machine": {...}, "facts": {...}, "readiness": {choice: {"value", "reason"}}}."""

from __future__ import annotations

import argparse
import json

from bench.gguf_figures import gguf_figures
from bench.machine import machine
from bench.ready_figures import ready_figures
from desktop.model.default_model import cache_root
from desktop.model.hardware import probe
from desktop.workers.readiness import decide


def readiness(gpus: bool = True) -> dict:
    """{"facts": the probe's facts, "readiness": the choices} for this machine (nothing stored)."""
    facts = probe(cache_root(), gpus=gpus)
    return {"facts": facts.to_json(), "readiness": decide(facts).to_json()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-gpu", action="store_true", help="do not ask the GPUs (no CUDA child process)")
    parser.add_argument("--ready", type=int, default=3, metavar="N", help="later starts of the embedded model (0: none)")
    parser.add_argument("--first", action="store_true", help="also a first start in an empty cache (a minute, 1 GB)")
    parser.add_argument("--gguf", action="store_true", help="also the GGUF figures: rss_over_file_max, decode/prefill vs llama.cpp")
    args = parser.parse_args()
    out = readiness(gpus=not args.no_gpu)
    out.update(ready_figures(args.ready, args.first))
    if args.ready:
        print(f"  ready_s_default: {out['ready_s_default']} s to the first token (median of {args.ready}; "
              f"ready {out['ready_s_to_idle']} s, first reply's TTFT {out['ttft_s_first_reply']} s)")
    if args.first:
        print(f"  first start: {out['ready_s_first_start']} s to the first token (then {out['ready_s_after_first']} s)")
    if args.gguf:
        out.update(gguf_figures())
    for name, choice in out["readiness"].items():
        if isinstance(choice, dict):
            print(f"{name:>16}: {choice['value']!s:<10} {choice['reason']}")
    print(json.dumps({"machine": machine(), **out}))


if __name__ == "__main__":
    main()
