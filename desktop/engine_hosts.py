"""The engine's Qt-free parts, shared by the window's composition (composition.py,
engine_runner.py) and the headless server (serve.py): the worker hosts for the settings' model,
the CPU threads they get, and the model's name as the first worker up reported it."""

from __future__ import annotations

import os

from desktop.model.loader import ModelSpec
from desktop.protocol import WorkerHost, WorkerStatus
from desktop.settings import Settings
from desktop.workers.factory import make_hosts, remote_hosts


def engine_hosts(settings: Settings) -> list[WorkerHost]:
    """The workers for the settings' model, then the remote workers (servers). A real model never
    runs in the window's process: its imports, tokenizer parse and weight loading hold the GIL for
    40-200 ms at a time, and its objects
    would fill the heap that the Qt thread's garbage collector scans. Only the tiny test model, built
    in code in milliseconds, stays on a thread (tests start many of them). Raises OmnideskError."""
    spec = settings.model_spec()
    return make_hosts(spec, settings.worker_config(), settings.workers, cores=worker_cores(),
                      isolate=spec.source != "tiny") + remote_hosts(settings.remote_specs())


def worker_cores() -> int:
    """CPU threads for the model: all cores but one, which is left to the UI thread. On 2 cores,
    2 OpenMP threads next to a busy UI made decoding ~10× slower (bench/ui_latency.py)."""
    return max(1, (os.cpu_count() or 1) - 1)


def model_info(statuses: list[WorkerStatus | None], spec: ModelSpec) -> tuple[str, bool]:
    """(model name, supports images) as the first worker that is up reported them."""
    for status in statuses:
        if status is not None and status.model:
            return status.model, status.supports_images
    return spec.source, False
