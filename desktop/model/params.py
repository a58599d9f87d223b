"""Sampling and stopping parameters of one generation, validated on construction: every field's
type and range is checked here, at the door, so that nothing the worker runs can raise on them."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from desktop.errors import InvalidRequest
from desktop.model.messages import first_unencodable

MAX_TOKENS = 1_000_000  # far above any context window; bounds what a reply may ask for
MAX_STOPS = 16
MAX_STOP_CHARS = 1_000
SEED_LIMIT = 2**64  # torch generators take seeds in [0, 2**64)


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
    grammar: str = ""  # llguidance grammar the reply must follow ("": free text); see model/grammar.py

    def __post_init__(self) -> None:
        _whole("max_tokens", self.max_tokens, 0, MAX_TOKENS)
        _set(self, "temperature", _number("temperature", self.temperature, 0.0, 5.0))
        _whole("top_k", self.top_k, 0, MAX_TOKENS)
        top_p = _number("top_p", self.top_p, 0.0, 1.0)
        if top_p == 0.0:
            raise InvalidRequest("top_p must be greater than 0 and at most 1 (got 0).")
        _set(self, "top_p", top_p)
        _set(self, "repetition_penalty", _number("repetition_penalty", self.repetition_penalty, 0.5, 2.0))
        if self.seed is not None:
            _whole("seed", self.seed, 0, SEED_LIMIT - 1)
        _set(self, "stop", _stops(self.stop))
        if not isinstance(self.ignore_eos, bool):
            raise InvalidRequest(f"ignore_eos must be true or false (got {self.ignore_eos!r}).")
        if not isinstance(self.grammar, str):
            raise InvalidRequest(f"grammar must be text (got {type(self.grammar).__name__}).")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


NAMES = tuple(f.name for f in fields(SamplingParams))


def as_params(value: SamplingParams | Mapping[str, Any] | None) -> SamplingParams:
    """SamplingParams from what a caller passed: the object itself, None (defaults) or a mapping of
    field names (an API client's JSON); anything else raises InvalidRequest."""
    if value is None:
        return SamplingParams()
    if isinstance(value, SamplingParams):
        return value
    if isinstance(value, Mapping):
        unknown = [str(k) for k in value if k not in NAMES]
        if unknown:
            raise InvalidRequest(f"Unknown sampling parameter {', '.join(map(repr, unknown))}: use {', '.join(NAMES)}.")
        return SamplingParams(**value)
    raise InvalidRequest(f"Sampling parameters must be SamplingParams or an object of fields (got {type(value).__name__}).")


def _set(params: SamplingParams, name: str, value: Any) -> None:
    object.__setattr__(params, name, value)


def _whole(name: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRequest(f"{name} must be a whole number (got {value!r}).")
    if not low <= value <= high:
        raise InvalidRequest(f"{name} must be between {low} and {high} (got {value}).")


def _number(name: str, value: Any, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidRequest(f"{name} must be a number (got {value!r}).")
    value = float(value)
    if not math.isfinite(value) or not low <= value <= high:
        raise InvalidRequest(f"{name} must be between {low:g} and {high:g} (got {value}).")
    return value


def _stops(stop: Any) -> tuple[str, ...]:
    if isinstance(stop, str):
        stop = (stop,)
    if not isinstance(stop, (tuple, list)):
        raise InvalidRequest(f"stop must be a string or a list of strings (got {type(stop).__name__}).")
    if len(stop) > MAX_STOPS:
        raise InvalidRequest(f"stop takes at most {MAX_STOPS} strings (got {len(stop)}).")
    for i, s in enumerate(stop):
        if not isinstance(s, str):
            raise InvalidRequest(f"stop string {i + 1} must be text (got {type(s).__name__}).")
        if not s or len(s) > MAX_STOP_CHARS:
            raise InvalidRequest(f"stop string {i + 1} must be 1 to {MAX_STOP_CHARS} characters long (got {len(s)}).")
        bad = first_unencodable(s)
        if bad is not None:
            raise InvalidRequest(f"stop string {i + 1} contains {bad}, which is not valid text.")
    return tuple(stop)

