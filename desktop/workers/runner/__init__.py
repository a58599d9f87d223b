"""Model runners: every tensor operation of a worker (see base.Runner); `make_runner` picks one."""

from __future__ import annotations

import logging
from typing import Any

from desktop.errors import InvalidRequest
from desktop.workers.runner.base import DecodeRow, Runner

__all__ = ["DecodeRow", "Runner", "make_runner"]
log = logging.getLogger(__name__)


def make_runner(loaded: Any, config: Any) -> Runner:
    """The runner for a LoadedModel under a WorkerConfig. `config.runner`:
    "auto" — the static runner when it can run the model (Llama family), else transformers;
    "hf" — transformers (any causal LM); "static" — the static runner (fixed-shape CUDA graphs
    on a GPU), an error if it cannot run the model; "static-bucketed" — the static runner with
    the fixed shapes of CUDA graphs run eagerly (their CPU twin, for tests)."""
    from desktop.model.fast_llama import supported

    choice = getattr(config, "runner", "auto")
    why = supported(loaded.model) if choice != "hf" else None
    if choice.startswith("static") and why:
        raise InvalidRequest(f"The static runner cannot run {loaded.name}: {why}. Use runner 'auto' or 'hf'.")
    config = config.sized(loaded.kv_bytes_per_token)  # the slot count, when the KV budget decides it
    if choice == "hf" or why:
        if why:
            log.info("Static runner not used for %s (%s): transformers runner", loaded.name, why)
        from desktop.workers.runner.hf import HFRunner

        return HFRunner(loaded.model, config.num_slots, loaded.kv_bytes_per_token, getattr(loaded, "vision", None))
    from desktop.workers.runner.static import StaticRunner

    return StaticRunner(loaded.model, config.num_slots, loaded.kv_bytes_per_token,
                        steps="bucketed" if choice == "static-bucketed" else "auto",
                        budget_bytes=config.kv_budget_bytes, batch_hint=config.max_running)
