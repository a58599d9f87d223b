"""Sampling and stopping parameters of one generation, validated on construction."""

from __future__ import annotations

from dataclasses import dataclass, field

from desktop.errors import InvalidRequest


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """How to pick tokens and when to stop. temperature 0 means greedy."""

    max_tokens: int = 512
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    repetition_penalty: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = field(default_factory=tuple)
    ignore_eos: bool = False  # generate exactly max_tokens (benchmarks)

    def __post_init__(self) -> None:
        if not isinstance(self.max_tokens, int) or self.max_tokens < 0:
            raise InvalidRequest(f"max_tokens must be a whole number ≥ 0 (got {self.max_tokens!r}).")
        if not 0.0 <= self.temperature <= 5.0:
            raise InvalidRequest(f"temperature must be between 0 and 5 (got {self.temperature}).")
        if self.top_k < 0:
            raise InvalidRequest(f"top_k must be ≥ 0 (got {self.top_k}).")
        if not 0.0 < self.top_p <= 1.0:
            raise InvalidRequest(f"top_p must be in (0, 1] (got {self.top_p}).")
        if not 0.5 <= self.repetition_penalty <= 2.0:
            raise InvalidRequest(f"repetition_penalty must be between 0.5 and 2 (got {self.repetition_penalty}).")
        if isinstance(self.stop, str):
            object.__setattr__(self, "stop", (self.stop,))
        if any(not s for s in self.stop):
            raise InvalidRequest("Stop strings must not be empty.")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0
