"""The engine's Qt-free parts, shared by the window's composition (composition.py,
engine_runner.py) and the headless server (serve.py): the worker hosts for the settings' model,
the device and CPU threads they get (the readiness check's choices), and the model's name as the
first worker up reported it."""

from __future__ import annotations

import threading

from desktop.model.default_model import cache_root
from desktop.model.hardware import physical_cores
from desktop.model.loader import ModelSpec
from desktop.protocol import WorkerHost, WorkerStatus
from desktop.settings import Settings, config_dir
from desktop.workers.factory import make_hosts, remote_hosts
from desktop.workers.readiness import Choices, device, threads_for
from desktop.workers.readiness_store import Readiness, check

_checked: Readiness | None = None
_lock = threading.Lock()


def readiness() -> Readiness:
    """This machine's readiness check, once per process (stored beside the settings)."""
    global _checked
    with _lock:
        if _checked is None:
            _checked = check(config_dir(), cache_root())
        return _checked


def engine_hosts(settings: Settings, ready: Choices | None = None) -> list[WorkerHost]:
    """The workers for the settings' model, then the remote workers (servers). A real model never
    runs in the window's process: its imports, tokenizer parse and weight loading hold the GIL for
    40-200 ms at a time, and its objects
    would fill the heap that the Qt thread's garbage collector scans. Only the tiny test model, built
    in code in milliseconds, stays on a thread (tests start many of them). Raises OmnideskError.
    `ready`: the readiness check's choices (default: this machine's); the device "auto" and the
    automatic KV budget resolve through them (the built-in test models stay on the CPU and skip
    the check)."""
    test_model = settings.model_source.startswith("tiny")
    choices = ready or (None if test_model else readiness().choices)
    where = "cpu" if choices is None else device(settings.device, choices)
    spec = settings.model_spec(where)
    if choices is not None and settings.device == "auto" and settings.dtype == "auto":
        spec = ModelSpec(spec.source, str(choices.dtype.value), spec.device)
    cores = worker_cores() if choices is None else int(choices.threads.value)
    gpus = int(choices.workers.value) if choices is not None and settings.device == "auto" and where == "cuda" else None
    config = settings.worker_config(None if choices is None else int(choices.kv_budget_mb.value))
    return make_hosts(spec, config, settings.workers, cores=cores, isolate=spec.source != "tiny",
                      gpus=gpus, gguf_runner=settings.gguf_runner) + remote_hosts(settings.remote_specs())


def worker_cores() -> int:
    """CPU threads for the model: the physical cores, less one for the window and the audio (see
    readiness.threads_for: on 2 cores, 2 OpenMP threads next to a busy UI made decoding ~10×
    slower, bench/ui_latency.py)."""
    return int(threads_for(physical_cores()).value)


def model_info(statuses: list[WorkerStatus | None], spec: ModelSpec) -> tuple[str, bool]:
    """(model name, supports images) as the first worker that is up reported them."""
    for status in statuses:
        if status is not None and status.model:
            return status.model, status.supports_images
    return spec.source, False
