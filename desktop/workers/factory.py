"""Which worker hosts to start for a model: one spawned subprocess per CUDA GPU (each falls back to
the CPU if its model fails to load there: fallback_host.py); on the CPU a
configurable number (default 1: a thread host unless isolated; more: subprocesses sharing the cores).
Remote workers (OpenAI-compatible servers) join them as hosts of their own. A .gguf file on the CPU
runs on llama.cpp by default (llamacpp/host.py: a local llama.cpp server as the worker)."""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Sequence

from desktop.model.gguf_facts import is_gguf_source
from desktop.model.loader import ModelSpec
from desktop.workers.config import WorkerConfig
from desktop.workers.fallback_host import CpuFallback
from desktop.workers.heartbeat import Liveness
from desktop.workers.llamacpp.host import LlamaCppHost
from desktop.workers.llamacpp.plan import ServerPlan
from desktop.protocol import WorkerHost
from desktop.workers.process_host import ProcessHost
from desktop.workers.remote.host import RemoteHost
from desktop.workers.remote.spec import RemoteSpec
from desktop.workers.thread_host import ThreadHost

log = logging.getLogger(__name__)
FALLBACK_KV_BYTES = 2 << 30  # a GPU-sized KV budget (a quarter of its memory) is capped to this in RAM


def cuda_devices() -> int:
    """GPUs visible to this process (0 without CUDA); does not initialise a CUDA context."""
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:  # a broken driver counts as no GPU
        return 0


def make_hosts(spec: ModelSpec, config: WorkerConfig, cpu_workers: int = 1, cores: int | None = None, *,
               isolate: bool = False, liveness: Liveness = Liveness(), gpus: int | None = None,
               gguf_runner: str = "llamacpp") -> list[WorkerHost]:
    """`isolate`: a single CPU worker runs in a subprocess too, not on a thread of this process
    (the window's process: a model there holds the GIL for 40-200 ms at a time while it loads).
    Every host watches its worker's heartbeats with `liveness`. `gpus`: how many the device "cuda"
    uses, when the readiness check knows (else torch is asked, in this process). `gguf_runner`:
    "llamacpp" runs a .gguf file on the CPU on one llama.cpp worker (its slots serve conversations
    at once, its threads are all `cores`); "torch" dequantises it into the torch runner. On a GPU a
    GGUF file takes the torch runner: the bundled llama.cpp is built for the CPU only."""
    cores = cores or os.cpu_count() or 1
    if gguf_runner == "llamacpp" and is_gguf_source(spec.source) and spec.device in ("cpu", "auto"):
        plan = ServerPlan.of(config.num_slots, config.kv_budget_bytes, cores)
        return [LlamaCppHost("llamacpp0", spec.source, plan)]
    if spec.device == "cuda":
        gpus = cuda_devices() if gpus is None else gpus
        if gpus:
            return [_on_gpu(spec, config, i, max(1, cores // gpus), liveness) for i in range(gpus)]
        log.warning("No GPU is visible (device %s): the model runs on the CPU", spec.device)
        spec = dataclasses.replace(spec, device="cpu", dtype=_cpu_dtype(spec.dtype))
    if spec.device.startswith("cuda:"):
        return [_on_gpu(spec, config, int(spec.device[5:]), cores, liveness)]
    if cpu_workers <= 1 and not isolate:
        return [ThreadHost("cpu0", spec, config, threads=cores, liveness=liveness)]
    per = max(1, cores // cpu_workers)  # oversubscribed OpenMP threads are pathologically slow
    return [ProcessHost(f"cpu{i}", spec, config, threads=per, liveness=liveness) for i in range(cpu_workers)]


def _on_gpu(spec: ModelSpec, config: WorkerConfig, gpu: int, cpu_threads: int, liveness: Liveness) -> WorkerHost:
    """The worker of GPU `gpu`, and the CPU worker that takes its place if the model fails there."""
    on_cpu = dataclasses.replace(spec, device="cpu", dtype=_cpu_dtype(spec.dtype))
    cpu_config = dataclasses.replace(config, kv_budget_bytes=min(config.kv_budget_bytes, FALLBACK_KV_BYTES))
    return CpuFallback(ProcessHost(f"gpu{gpu}", spec, config, gpu=gpu, threads=1, liveness=liveness),
                       lambda: ProcessHost(f"gpu{gpu}", on_cpu, cpu_config, threads=cpu_threads, liveness=liveness))


def _cpu_dtype(dtype: str) -> str:
    """A GPU's dtype as the CPU should run it: float32 stays; bf16/fp16 become "auto" (bf16 only
    where the CPU has it natively, fp16 never: it is emulated and slow there)."""
    return dtype if dtype == "float32" else "auto"


def remote_hosts(specs: Sequence[RemoteSpec], ids: Sequence[str] | None = None, **health: object) -> list[WorkerHost]:
    """One host per configured server: remote0, remote1, … in the order of the settings, or the
    given `ids` (servers added to a running engine: remote/roster.py); `health`: RemoteHost's
    health_s / backoff / timeout_s."""
    ids = ids if ids is not None else [f"remote{i}" for i in range(len(specs))]
    return [RemoteHost(wid, spec, **health) for wid, spec in zip(ids, specs, strict=True)]  # type: ignore[arg-type]
