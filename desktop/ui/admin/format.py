"""Small formatters shared by the admin tables and the status bar: ages ("3 s ago"), byte
sizes, the KV slots' count, percentages and the loading fraction inside a worker's progress message."""

from __future__ import annotations

import re

_LEFT = re.compile(r"·\s*(about \d+ (?:s|min) left)\s*$")
_PERCENT = re.compile(r"(\d{1,3})\s*%\s*(?:·\s*about \d+ (?:s|min) left\s*)?$")  # the time left may follow


def ago(seconds: float | None) -> str:
    """'just now', '3 s ago', '4 min ago', '2 h ago'; '—' when never."""
    if seconds is None:
        return "—"
    if seconds < 1:
        return "just now"
    if seconds < 60:
        return f"{seconds:.0f} s ago"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.0f} h ago"


def size(n: int | None) -> str:
    """Bytes as '0 B', '512 KB', '3.4 MB', '1.20 GB' (powers of 1024); '—' when unknown."""
    if n is None:
        return "—"
    if n < 1024:
        return f"{n} B"
    for unit, scale in (("KB", 1 << 10), ("MB", 1 << 20), ("GB", 1 << 30)):
        if n < scale << 10 or unit == "GB":
            value = n / scale
            return f"{value:.0f} {unit}" if value >= 100 or unit == "KB" else f"{value:.1f} {unit}"
    return f"{n} B"  # pragma: no cover


def held_slots(held: int, total: int) -> str:
    """The KV slots table's title: how many slots hold a conversation, of how many (a worker may
    keep a hundred; the table lists only those that hold something)."""
    if not total:
        return "KV slots"
    return f"KV slots · {held:,} of {total:,} hold a conversation" + (" (empty ones not listed)" if held < total else "")


def percent(fraction: float) -> str:
    return f"{fraction * 100:.0f}%"


def loading_left(message: str) -> str:
    """The time left in a progress message like 'Loading model… 40% · about 12 s left' ("" if none)."""
    m = _LEFT.search(message or "")
    return m.group(1) if m else ""


def loading_fraction(message: str) -> float | None:
    """The fraction in a progress message like 'Loading model… 40%' or 'Loading model… 40% · about
    12 s left' (None: no number in it)."""
    m = _PERCENT.search(message or "")
    return min(int(m.group(1)), 100) / 100 if m else None
