"""How the Recordings page writes times, durations and dates."""

from __future__ import annotations

import time

from desktop.recording.sane import epoch as valid_epoch
from desktop.recording.sane import number


def clock_text(seconds: float) -> str:
    """75.4 → "1:15", 3725 → "1:02:05"; "—" for a time that is not one (NaN, ±inf, 1e300)."""
    f = number(seconds)
    if f is None or f > 1e9:
        return "—"
    s = max(0, int(f))
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def date_text(epoch: float) -> str:
    """Local date and time, e.g. "2026-11-25 14:02" (sorts and reads the same in every locale)."""
    when = valid_epoch(epoch)
    if when is None:
        return "—"
    try:
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(when))
    except (OverflowError, OSError, ValueError):  # a platform whose localtime() stops sooner
        return "—"


def kind_text(kind: str, video: bool = False) -> str:
    return "Chat" if kind == "chat" else ("Video call" if video else "Call")
