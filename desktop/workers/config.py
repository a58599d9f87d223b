"""Worker configuration: slots, cache policy, memory budget and scheduling budgets.

How many conversations a worker keeps follows its KV memory budget (`num_slots` 0, the default):
`slot_count` gives the number, once the model's KV cost per token is known (`WorkerConfig.sized`).
The budget bounds the memory itself (the slot table budgets what the slots hold, `SlotTable.reserve`);
the count only bounds the bookkeeping. `max_running`, how many replies are decoded at once, is a
separate, small number."""

from __future__ import annotations

from dataclasses import dataclass, replace
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
MAX_SLOTS = 256  # slots of one worker, at most (set by hand)
AUTO_MAX_SLOTS = 128  # at most this many when the budget decides
AUTO_FLOOR_TOKENS = 512  # a conversation is counted at least this long when the budget is shared out
DECODE_BATCH = 4  # replies decoded at once unless set (max_running 0)


def slot_count(budget_bytes: int, kv_bytes_per_token: int, least: int = 1) -> int:
    """How many conversations a KV budget keeps: the budget over what a short conversation
    (AUTO_FLOOR_TOKENS) costs, at least `least` (the decode batch) and at most AUTO_MAX_SLOTS.
    Longer conversations take more of the budget: the slot table evicts to fit, so the count
    is a ceiling on the number kept, never a promise of memory."""
    per = AUTO_FLOOR_TOKENS * max(kv_bytes_per_token, 1)
    return max(least, 1, min(budget_bytes // per, AUTO_MAX_SLOTS))


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    num_slots: int = 0  # conversations kept in RAM; 0 → as many as kv_budget_bytes holds (slot_count)
    max_running: int = 0  # sequences decoded at once; 0 → DECODE_BATCH (or num_slots when fewer)
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
        if not 0 <= self.num_slots <= MAX_SLOTS:
            raise InvalidRequest(f"Slots per worker must be between 1 and {MAX_SLOTS}, or 0 for automatic "
                                 f"(got {self.num_slots}).")
        if self.max_running == 0:
            object.__setattr__(self, "max_running", min(self.num_slots or DECODE_BATCH, DECODE_BATCH))
        if not 1 <= self.max_running <= (self.num_slots or MAX_SLOTS):
            raise InvalidRequest("Running sequences must be between 1 and the number of slots.")
        if self.cache_min_tokens < 1:
            raise InvalidRequest("cache_min_tokens must be at least 1.")
        if self.kv_budget_bytes < 1 << 20:
            raise InvalidRequest("The KV memory budget must be at least 1 MiB.")
        if self.prefill_chunk < 1 or self.prefill_budget < 1:
            raise InvalidRequest("Prefill chunk and budget must be at least 1 token.")
        if self.runner not in RUNNERS:
            raise InvalidRequest(f"Unknown model runner {self.runner!r}; one of {', '.join(RUNNERS)}.")

    @property
    def auto_slots(self) -> bool:
        return self.num_slots == 0

    def sized(self, kv_bytes_per_token: int) -> WorkerConfig:
        """This config with its slot count decided for a model whose KV takes `kv_bytes_per_token`
        (unchanged when the count was set by hand)."""
        if not self.auto_slots:
            return self
        return replace(self, num_slots=slot_count(self.kv_budget_bytes, kv_bytes_per_token, self.max_running))
