"""Model runners: every tensor operation of a worker (see base.Runner); `make_runner` picks one."""

from __future__ import annotations

from typing import Any

from desktop.errors import InvalidRequest
from desktop.workers.runner.base import DecodeRow, Runner

__all__ = ["DecodeRow", "Runner", "make_runner"]


def make_runner(loaded: Any, config: Any) -> Runner:
    """The runner for a LoadedModel under a WorkerConfig: `config.runner` is "auto" (the best one
    for the model and device), "hf" (transformers, any causal LM) or "static" (not available yet)."""
    choice = getattr(config, "runner", "auto")
    if choice == "static":
        raise InvalidRequest("The static runner is not available in this build; use runner 'auto' or 'hf'.")
    from desktop.workers.runner.hf import HFRunner

    return HFRunner(loaded.model, config.num_slots, loaded.kv_bytes_per_token)
