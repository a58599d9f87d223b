"""The machine a benchmark ran on, for its JSON: the CPU model and the cores this process may use."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def cpu_model() -> str:
    try:
        return next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown"


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def machine() -> dict:
    """{"cpu": model name, "cores": n}: merge into a benchmark's last JSON line."""
    return {"cpu": cpu_model(), "cores": cores()}
