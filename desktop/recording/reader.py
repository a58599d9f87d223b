"""Reads one recording folder (format v1, see docs/notes/recordings.md) without Qt: meta,
timeline events, both audio tracks, frames and per-turn summaries. Opens crashed recordings too."""

from __future__ import annotations

import bisect
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from desktop.errors import OmnideskError
from desktop.recording.sane import MAX_T, check_meta, epoch, in_range, offset, rate
from desktop.recording.timeline import Event, read_events
from desktop.recording.track import Chunk, Track
from desktop.recording.turns import MAX_TEXT_CHARS, TEXT_KINDS, Turn, TurnBuilder

log = logging.getLogger(__name__)
FORMAT_VERSION = 1
MAX_META_BYTES = 1 << 20
MAX_PROBLEMS = 50  # said one by one; the rest as a count
MEDIA_KINDS = frozenset(("audio", "frame"))  # kept as chunks and frames, not as events
_FOLDER = re.compile(r"^(\d{8}-\d{6})-(call|chat)-([0-9a-f]{8})$")
__all__ = ["Event", "Frame", "Recording", "RecordingError", "Turn", "open_recording", "read_events"]


class RecordingError(OmnideskError):
    """The folder is not a recording that can be opened."""

    code = "recording"


@dataclass(frozen=True, slots=True)
class Frame:
    t: float
    path: Path


@dataclass(slots=True)
class Recording:
    folder: Path
    meta: dict[str, Any]  # its times and rates checked (an impossible one is None, said in `problems`)
    events: list[Event]  # the timeline's events but the text and media ones (in `turns`, the tracks, `frames`)
    user: Track
    ai: Track
    frames: list[Frame]
    turns: list[Turn]
    notes: list[str]  # the recording's own notes (e.g. "disk full")
    problems: list[str]  # what the reader had to skip (torn line, missing chunk)
    span: float = 0.0  # the latest `t` of any event

    @property
    def kind(self) -> str:
        return "chat" if self.meta.get("type") == "chat" else "call"

    @property
    def title(self) -> str:
        return str(self.meta.get("title") or "")

    @property
    def started_at(self) -> float:
        return epoch(self.meta.get("started_at")) or 0.0

    @property
    def complete(self) -> bool:
        """Ended cleanly (False: still recording, or the app stopped before the end)."""
        return self.meta.get("ended_at") is not None or any(e.kind == "end" for e in self.events)

    @property
    def duration(self) -> float:
        ends = [self.user.duration, self.ai.duration, self.span]  # span: the latest time of any event
        ended = epoch(self.meta.get("ended_at"))
        if ended is not None and ended >= self.started_at > 0:
            ends.append(ended - self.started_at)
        return min(max(ends), MAX_T)

    @property
    def barge_ins(self) -> list[float]:
        return [e.t for e in self.events if e.kind == "barge_in"]

    def turn_at(self, t: float) -> int | None:
        """Index into `turns` of the turn playing at `t` (the last one started by then)."""
        i = bisect.bisect_right([turn.start for turn in self.turns], t + 1e-9) - 1
        return i if i >= 0 else None

    def frame_at(self, t: float) -> int | None:
        """Index into `frames` of the frame shown at `t` (the last one taken by then)."""
        i = bisect.bisect_right([f.t for f in self.frames], t + 1e-9) - 1
        return i if i >= 0 else (0 if self.frames else None)


def read_meta(folder: Path) -> dict[str, Any] | None:
    """meta.json as a dict, or None when it is missing, too large or not valid JSON."""
    path = folder / "meta.json"
    try:
        if path.stat().st_size > MAX_META_BYTES:
            return None
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def meta_from_name(folder: Path) -> dict[str, Any]:
    """What the folder's name tells when meta.json cannot be read: type, start time and id."""
    import time

    m = _FOLDER.match(folder.name)
    if m is None:
        return {"version": FORMAT_VERSION, "type": "call", "started_at": 0.0, "ended_at": None}
    try:
        started = time.mktime(time.strptime(m.group(1), "%Y%m%d-%H%M%S"))
    except (ValueError, OverflowError):  # a name like a session's with no real date (20261399-…)
        started = 0.0
    return {"version": FORMAT_VERSION, "id": m.group(3), "type": m.group(2), "started_at": started,
            "ended_at": None}


def inside(folder: Path, name: Any) -> Path | None:
    """`folder/name` if `name` is a relative path that stays inside the folder and is not a
    half-written `.part` file; else None."""
    if not isinstance(name, str) or not name or name.endswith(".part"):
        return None
    try:
        path, root = (folder / name).resolve(), folder.resolve()
    except (OSError, ValueError, RuntimeError):  # a NUL byte in the name, a symlink loop
        return None
    return path if root in path.parents else None


def open_recording(folder: Path | str, max_text: int = MAX_TEXT_CHARS) -> Recording:
    """Read a recording. Everything written before a crash opens: meta.json with `ended_at` null
    (or, if it is unreadable, what the folder's name says), a torn last timeline line, chunks that
    were listed but are gone. Raises RecordingError when there is no recording there at all."""
    folder = Path(folder)
    problems: list[str] = []
    meta = read_meta(folder)
    if meta is None:
        if not (folder / "timeline.jsonl").exists():
            raise RecordingError(f"“{folder.name}” is not a recording (it has no meta.json or timeline).")
        problems.append("meta.json could not be read; the folder's name was used")
        meta = meta_from_name(folder)
    version = meta.get("version", FORMAT_VERSION)
    if isinstance(version, int) and version > FORMAT_VERSION:
        raise RecordingError(f"“{folder.name}” was recorded by a newer Omnidesk (format {version}).")
    meta, damage = check_meta(meta)
    problems += damage
    if meta.get("started_at") is None:  # an impossible start: the folder's name says when
        meta["started_at"] = meta_from_name(folder)["started_at"]
    events: list[Event] = []
    chunks: dict[str, list[Chunk]] = {"user": [], "ai": []}
    frames: list[Frame] = []
    builder = TurnBuilder(lambda name: inside(folder, name), max_text)
    span = 0.0
    for e in read_events(folder, problems):  # streamed: the text is kept once, in the turns
        span = max(span, e.t)
        builder.add(e.t, e.kind, e.data)
        if e.kind in TEXT_KINDS:
            continue
        if e.kind not in MEDIA_KINDS:
            events.append(e)
        if e.kind == "audio" and isinstance(e.data.get("track"), str) and e.data["track"] in chunks:
            chunk = _chunk(folder, e)
            if isinstance(chunk, Chunk):
                chunks[e.data["track"]].append(chunk)
            elif len(problems) <= MAX_PROBLEMS:  # a timeline of broken lines: said up to a point
                problems.append(chunk)
        elif e.kind == "frame":
            path = inside(folder, e.data.get("file"))
            if path is not None and path.is_file():
                start = offset(e.data.get("start"))
                frames.append(Frame(e.t if start is None else start, path))
    if builder.cut:
        problems.append("the transcript is too long to show whole; its end is left out")
    if len(problems) > MAX_PROBLEMS:
        problems[MAX_PROBLEMS:] = ["and more (skipped)"]
    frames.sort(key=lambda f: f.t)
    user = Track("user", _rate(meta.get("user_rate"), chunks["user"], 16000), chunks["user"])
    ai = Track("ai", _rate(meta.get("ai_rate"), chunks["ai"], 22050), chunks["ai"])
    notes = [str(e.data.get("text", "")) for e in events if e.kind == "note"]
    return Recording(folder, meta, events, user, ai, frames, builder.turns(), notes, problems, span)


def _chunk(folder: Path, e: Event) -> Chunk | str:
    """The audio chunk a timeline line lists, or why not: its file is gone, or its start, duration
    or rate is not a real one."""
    name = e.data.get("file")
    path = inside(folder, name)
    if path is None or not path.is_file():
        return f"audio chunk {str(name)[:80]!r} is missing (skipped)"
    start, duration = offset(e.data.get("start")), in_range(e.data.get("duration"), 1e-6, 3600.0)
    hz = rate(e.data.get("rate"))
    if start is None or duration is None or hz is None:
        return f"audio chunk {str(name)[:80]!r} has no valid start, duration or rate (skipped)"
    return Chunk(path, start, duration, hz)


def _rate(value: Any, chunks: list[Chunk], default: int) -> int:
    if rate(value) is not None:
        return int(value)
    return chunks[0].rate if chunks else default
