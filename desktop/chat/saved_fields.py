"""Checks for the fields of saved files (conversations): timestamps, text that can be written as
UTF-8, and a reply's stats, so that a hand-edited or damaged value never breaks a page later."""

from __future__ import annotations

import math
import re
from dataclasses import fields
from typing import Any

from desktop.protocol import TokenStats

MAX_TIME = 253_402_300_799.0  # 9999-12-31T23:59:59Z, the last moment the date functions can show
_SURROGATE = re.compile("[\\ud800-\\udfff]")
# a str enum's field (kind) is saved and checked as text
_STAT_TYPES = {f.name: str if isinstance(f.default, str) else type(f.default) for f in fields(TokenStats)}


def timestamp(value: Any) -> float | None:
    """`value` as a timestamp when it is one (a finite number of seconds, 1970 to 9999), else None."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok and 0 < value <= MAX_TIME else None


def clean_text(text: str) -> str:
    """`text` that can be saved as UTF-8: lone surrogates (from JSON escapes) become U+FFFD."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)


def reply_stats(value: Any) -> dict[str, Any] | None:
    """A reply's stats with only well-typed entries: the TokenStats fields with their own types
    (numbers finite), other keys only with a short text, a number, a bool or null."""
    if not isinstance(value, dict):
        return None
    out: dict[str, Any] = {}
    for key, v in value.items():
        want = _STAT_TYPES.get(key)
        number = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and abs(v) < 2**53
        if number and (want is float or want is int and isinstance(v, int)):
            out[key] = v
        elif want is str and isinstance(v, str) and len(v) <= 200:
            out[key] = clean_text(v)
        elif want is None and isinstance(key, str) and len(key) <= 64 and (
                number or v is None or isinstance(v, bool) or isinstance(v, str) and len(v) <= 1000):
            out[key] = clean_text(v) if isinstance(v, str) else v
    return out or None
