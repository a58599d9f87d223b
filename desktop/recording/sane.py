"""Checks on every number read from a recording (meta.json, timeline lines): finite, of the right
type and in a range a real recording can have; anything else is damage, said in words, never raised."""

from __future__ import annotations

import math
from typing import Any

MAX_T = 7 * 24 * 3600.0  # a time past a week into a recording is a corrupt value, not a long call
EPOCH_MIN = 1.0  # 1970 (0 is what a folder without a readable start falls back to)
EPOCH_MAX = 32_503_680_000.0  # the year 3000: the last date every platform's localtime() can write
RATE_MIN, RATE_MAX = 1000, 384_000


def number(value: Any) -> float | None:
    """`value` as a finite float; None for NaN, ±inf, bools, strings and anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        f = float(value)  # an int past 1e308 overflows here
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def in_range(value: Any, lo: float, hi: float) -> float | None:
    """`value` as a float if it is finite and lo ≤ value ≤ hi, else None."""
    f = number(value)
    return f if f is not None and lo <= f <= hi else None


def epoch(value: Any) -> float | None:
    """A wall-clock time (epoch seconds) a recording can have started or ended at, else None."""
    return in_range(value, EPOCH_MIN, EPOCH_MAX)


def offset(value: Any) -> float | None:
    """Seconds since a recording started (0 … a week), else None."""
    return in_range(value, 0.0, MAX_T)


def rate(value: Any) -> int | None:
    """An audio sample rate a recording can have, else None."""
    f = in_range(value, RATE_MIN, RATE_MAX)
    return int(f) if f is not None and f == int(f) else None


def check_meta(meta: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A copy of `meta` whose times and rates are valid or None, and what was wrong (as the user
    reads it). `ended_at` before `started_at` or more than MAX_T after it counts as damage too."""
    out, problems = dict(meta), []
    started = out.get("started_at")
    if started is not None and epoch(started) is None:
        problems.append(f"meta.json has an impossible start time ({_short(started)})")
        out["started_at"] = None
    ended = out.get("ended_at")
    if ended is not None:
        end = epoch(ended)
        start = epoch(out.get("started_at"))
        if end is None or (start is not None and not 0.0 <= end - start <= MAX_T):
            problems.append(f"meta.json has an impossible end time ({_short(ended)})")
            out["ended_at"] = None
    for key in ("user_rate", "ai_rate"):
        if out.get(key) is not None and rate(out[key]) is None:
            problems.append(f"meta.json has an impossible {key.replace('_', ' ')} ({_short(out[key])})")
            out[key] = None
    return out, problems


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"
