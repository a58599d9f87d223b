"""How the app runs a GGUF file's llama.cpp server, from the worker's settings: how many
conversations it keeps (slots), the one KV pool they share (from the KV budget, at most the
model's own context) and its CPU threads."""

from __future__ import annotations

from dataclasses import dataclass

from desktop.model.gguf_facts import GgufFacts

DEFAULT_SLOTS = 4  # llama.cpp keeps one conversation's prompt cache per slot
MIN_POOL = 512  # tokens; below this a chat does not fit


@dataclass(frozen=True, slots=True)
class ServerPlan:
    """`slots`: conversations kept at once; `kv_budget_bytes`: the KV pool's memory (0: the model's
    own context); `threads`: CPU threads for decode and prefill."""

    slots: int = DEFAULT_SLOTS
    kv_budget_bytes: int = 0
    threads: int = 1

    def __post_init__(self) -> None:
        if self.slots < 1 or self.threads < 1 or self.kv_budget_bytes < 0:
            raise ValueError(f"a llama.cpp worker needs at least one slot and one thread (got {self})")

    @classmethod
    def of(cls, num_slots: int, kv_budget_bytes: int, threads: int) -> ServerPlan:
        """From WorkerConfig's fields: num_slots 0 (automatic) keeps DEFAULT_SLOTS."""
        return cls(num_slots or DEFAULT_SLOTS, kv_budget_bytes, max(1, threads))

    def pool(self, facts: GgufFacts) -> int:
        """Tokens in the KV pool all slots share: what the budget holds, at most the model's context
        (llama.cpp's f16 cache); the model's context when the budget does not say."""
        own = facts.context_length or 4096
        per_token = facts.kv_bytes_per_token()
        if not self.kv_budget_bytes or not per_token:
            return own
        return max(MIN_POOL, min(own, self.kv_budget_bytes // per_token))
