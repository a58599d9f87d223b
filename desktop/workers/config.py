"""Worker configuration: slots, cache policy, memory budget and scheduling budgets."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from desktop.errors import InvalidRequest


class CacheMode(str, Enum):
    """off: no reuse · spc: system prompt cache only · imc: incremental message cache · imc+spc: both."""

    OFF = "off"
    SPC = "spc"
    IMC = "imc"
    IMC_SPC = "imc+spc"

    @property
    def imc(self) -> bool:
        return self in (CacheMode.IMC, CacheMode.IMC_SPC)

    @property
    def spc(self) -> bool:
        return self in (CacheMode.SPC, CacheMode.IMC_SPC)


RUNNERS = ("auto", "hf", "static", "static-bucketed")


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    num_slots: int = 4
    max_running: int = 0  # sequences decoded at once; 0 → num_slots
    cache_mode: CacheMode = CacheMode.IMC_SPC
    cache_min_tokens: int = 100
    kv_budget_bytes: int = 4 << 30
    prefill_chunk: int = 512  # tokens per forward when prefilling
    prefill_budget: int = 512  # prefill tokens per scheduler tick, so running decodes are not starved
    runner: str = "auto"  # the model runner: "auto" | "hf" | "static" | "static-bucketed" (see workers/runner)
    kv_dir: str = ""  # the folder of KV snapshots on disk (workers/kv_disk); "" = no disk tier
    kv_disk_budget_bytes: int = 2 << 30  # what the snapshots may take on disk, oldest used out first

    def __post_init__(self) -> None:
        object.__setattr__(self, "cache_mode", CacheMode(self.cache_mode))
        if not 1 <= self.num_slots <= 256:
            raise InvalidRequest(f"Slots per worker must be between 1 and 256 (got {self.num_slots}).")
        if self.max_running == 0:
            object.__setattr__(self, "max_running", self.num_slots)
        if not 1 <= self.max_running <= self.num_slots:
            raise InvalidRequest("Running sequences must be between 1 and the number of slots.")
        if self.cache_min_tokens < 1:
            raise InvalidRequest("cache_min_tokens must be at least 1.")
        if self.kv_budget_bytes < 1 << 20:
            raise InvalidRequest("The KV memory budget must be at least 1 MiB.")
        if self.prefill_chunk < 1 or self.prefill_budget < 1:
            raise InvalidRequest("Prefill chunk and budget must be at least 1 token.")
        if self.runner not in RUNNERS:
            raise InvalidRequest(f"Unknown model runner {self.runner!r}; one of {', '.join(RUNNERS)}.")
