"""What a server says it serves, checked: its /v1/models list and llama.cpp's /props read into
models, a context window and a slot count, refusing what no real server sends (Unusable)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from desktop.workers.remote.spec import MAX_FIELD, MAX_SLOTS

MAX_CONTEXT = 1 << 24  # tokens; above the largest context window any model has


class Unusable(Exception):
    """The server answers, but not as a server Omnidesk can use; str() says why, in words."""


@dataclass(frozen=True, slots=True)
class Props:
    """llama.cpp's /props: the context per slot (0: not said), its slots (0: not said)."""

    context: int
    slots: int
    llamacpp: bool


def shown(value: Any) -> str:
    """A value a server sent, short enough for a message."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "…"


def whole(value: Any, what: str, lo: int, hi: int) -> int:
    """`value` as a whole number in [lo, hi], else Unusable naming `what`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Unusable(f"{what} is not a number ({shown(value)})")
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise Unusable(f"{what} is not a whole number ({shown(value)})")
    if not lo <= value <= hi:
        raise Unusable(f"{what} is {shown(value)}, not a number from {lo:,} to {hi:,}")
    return int(value)


def models_of(raw: bytes) -> list[dict]:
    """The models a 200 answer of /v1/models lists (those with a usable id)."""
    try:
        obj = json.loads(raw)
    except ValueError:
        raise Unusable("its /v1/models answer is not JSON (is this an OpenAI-compatible server?)") from None
    if not isinstance(obj, dict):
        raise Unusable(f"its /v1/models answer is not a JSON object ({shown(obj)})")
    data = obj.get("data", [])
    if not isinstance(data, list):
        raise Unusable(f"its /v1/models answer has no list of models (\"data\" is {shown(data)})")
    return [m for m in data if isinstance(m, dict) and isinstance(m.get("id"), str) and 0 < len(m["id"]) <= MAX_FIELD]


def context_of(model: dict) -> int:
    """vLLM's max_model_len of a listed model (0 when it does not say)."""
    value = model.get("max_model_len")
    return 0 if value is None else whole(value, "its max_model_len (/v1/models)", 0, MAX_CONTEXT)


def props_of(raw: bytes) -> Props | None:
    """llama.cpp's /props; None when the answer is not a JSON object (not llama.cpp's)."""
    try:
        obj = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    settings = obj.get("default_generation_settings")
    if settings is not None and not isinstance(settings, dict):
        raise Unusable(f"its /props default_generation_settings is not an object ({shown(settings)})")
    n_ctx, total = (settings or {}).get("n_ctx"), obj.get("total_slots")
    context = 0 if n_ctx is None else whole(n_ctx, "its n_ctx (/props)", 0, MAX_CONTEXT)
    slots = 0 if total is None else whole(total, "its total_slots (/props)", 0, MAX_SLOTS)
    return Props(context, slots, settings is not None)
