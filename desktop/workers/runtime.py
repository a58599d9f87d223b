"""Load a model and build its Worker, reporting progress as WorkerStatus(LOADING, stage); shared
by the thread host and the subprocess child so both run exactly the same code."""

from __future__ import annotations

from typing import Callable

from desktop.protocol import Event, WorkerState
from desktop.model.loader import ModelSpec, load_model
from desktop.workers.config import WorkerConfig
from desktop.workers.load_time_left import TimeLeft, left_text
from desktop.workers.load_watch import LoadWatch


def static_only(config: WorkerConfig) -> bool:
    """Whether the worker runs its model with the static runner only (runner "auto" or "static…"):
    a Llama model then loads as its packed weights, without the transformers model (model/fast_start.py)."""
    return config.runner == "auto" or config.runner.startswith("static")


def load_worker(
    spec: ModelSpec,
    config: WorkerConfig,
    emit: Callable[[Event], None],
    status: Callable[[WorkerState, str], None],
    threads: int | None = None,
    watch: LoadWatch | None = None,
):
    """Raises OmnideskError (e.g. ModelLoadError) when the model cannot be loaded. `watch`, started
    here on the loading thread, hears each stage and reports a load that stops making progress."""
    if watch is not None:
        watch.start()
    try:
        import torch

        from desktop.workers.worker import Worker

        if threads:
            torch.set_num_threads(threads)
        status(WorkerState.LOADING, "Starting…")

        time_left = TimeLeft()

        def progress(stage: str, fraction: float | None) -> None:
            if watch is not None:
                watch.progress()
            left = time_left(stage, fraction)
            text = stage if fraction is None else f"{stage} {fraction:.0%}"
            status(WorkerState.LOADING, text if left is None else f"{text} · {left_text(left)}")

        loaded = load_model(spec, progress=progress, static=static_only(config))
        return Worker(loaded, config, emit=emit)
    finally:
        if watch is not None:
            watch.stop()
