"""Streams a recording's timeline.jsonl one line at a time (never the whole file in memory): each
line that is a JSON object with a valid `t` and a `kind`; what could not be read is counted."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from desktop.recording.sane import offset

MAX_LINE = 8 << 20  # a longer line is damage (the recorder writes lines of a few KB), skipped unread
MAX_SAID = 5  # unreadable lines named one by one in `problems`; the rest are counted
_decode = json.JSONDecoder().decode


@dataclass(frozen=True, slots=True)
class Event:
    t: float  # seconds since started_at
    kind: str
    data: dict[str, Any]


def parse(line: bytes) -> Event | None:
    """One timeline line as an Event, or None when it is not a JSON object with a `t` between 0
    and a week (not NaN, not ±inf: `1e999` reads as inf) and a string `kind`."""
    try:
        obj = _decode(line.decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("kind"), str):
        return None
    t = offset(obj.get("t"))
    if t is None:
        return None
    return Event(t, obj["kind"], {k: v for k, v in obj.items() if k not in ("t", "kind")})


def _lines(path: Path) -> Iterator[bytes | None]:
    """The file's lines (None for one longer than MAX_LINE, whose rest is skipped)."""
    with path.open("rb") as f:
        while True:
            line = f.readline(MAX_LINE)
            if not line:
                return
            if len(line) >= MAX_LINE and not line.endswith(b"\n"):
                while (rest := f.readline(MAX_LINE)) and not rest.endswith(b"\n"):
                    pass
                yield None
                continue
            yield line


def read_events(folder: Path, problems: list[str] | None = None) -> Iterator[Event]:
    """The timeline's events in file order, streamed. Lines that cannot be read are skipped and
    said in `problems` (once the file is read): a torn last line after a crash as such, the first
    few others by number, the rest as a count."""
    named: list[int] = []  # the first unreadable lines' numbers
    more = 0  # how many others
    last_bad = False  # the last non-empty line was unreadable
    try:
        for n, line in enumerate(_lines(folder / "timeline.jsonl"), 1):
            if line is not None and not line.strip():
                continue
            event = parse(line) if line is not None else None
            last_bad = event is None
            if event is not None:
                yield event
            elif len(named) < MAX_SAID + 1:  # one more than said: it may turn out to be the torn last line
                named.append(n)
            else:
                more += 1
    except OSError:
        pass
    if problems is None or not named:
        return
    if last_bad:  # a torn last line: a crash while writing, not damage
        if more:
            more -= 1
        else:
            named.pop()
    said = named[:MAX_SAID]
    problems += [f"timeline line {n} could not be read (skipped)" for n in said]
    if more + len(named) - len(said):
        problems.append(f"{more + len(named) - len(said)} more timeline lines could not be read (skipped)")
    if last_bad:
        problems.append("the last timeline entry was cut short (skipped)")
