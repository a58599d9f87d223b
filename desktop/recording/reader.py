"""Reads one recording folder (format v1, see docs/ARCHITECTURE.md "Recordings") without Qt: meta,
timeline events, both audio tracks, frames and per-turn summaries. Opens crashed recordings too."""

from __future__ import annotations

import bisect
import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from desktop.errors import OmnideskError
from desktop.recording.track import Chunk, Track

log = logging.getLogger(__name__)
FORMAT_VERSION = 1
MAX_META_BYTES = 1 << 20
MAX_T = 7 * 24 * 3600.0  # a time past a week into a recording is a corrupt value, not a long call
_FOLDER = re.compile(r"^(\d{8}-\d{6})-(call|chat)-([0-9a-f]{8})$")


class RecordingError(OmnideskError):
    """The folder is not a recording that can be opened."""

    code = "recording"


@dataclass(frozen=True, slots=True)
class Event:
    t: float  # seconds since started_at
    kind: str
    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Frame:
    t: float
    path: Path


@dataclass(slots=True)
class Turn:
    """One exchange: what the user said or typed, the reply, a barge-in, the turn's numbers."""

    turn: int
    start: float  # the turn's first event
    user_text: str = ""
    assistant_text: str = ""
    heard: str | None = None  # set when the user talked over the reply: what was heard of it
    barge_in_t: float | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    images: list[Path] = field(default_factory=list)

    @property
    def latency_ms(self) -> float | None:
        """End of the user's speech → first sound of the reply (calls), else time to first token."""
        for key in ("eos_to_audio_ms", "ttft_ms"):
            value = self.metrics.get(key)
            if isinstance(value, (int, float)):
                return float(value)
        return None


@dataclass(slots=True)
class Recording:
    folder: Path
    meta: dict[str, Any]
    events: list[Event]
    user: Track
    ai: Track
    frames: list[Frame]
    turns: list[Turn]
    notes: list[str]  # the recording's own notes (e.g. "disk full")
    problems: list[str]  # what the reader had to skip (torn line, missing chunk)

    @property
    def kind(self) -> str:
        return "chat" if self.meta.get("type") == "chat" else "call"

    @property
    def title(self) -> str:
        return str(self.meta.get("title") or "")

    @property
    def started_at(self) -> float:
        value = self.meta.get("started_at")
        return float(value) if isinstance(value, (int, float)) else 0.0

    @property
    def complete(self) -> bool:
        """Ended cleanly (False: still recording, or the app stopped before the end)."""
        return self.meta.get("ended_at") is not None or any(e.kind == "end" for e in self.events)

    @property
    def duration(self) -> float:
        ends = [self.user.duration, self.ai.duration, max((e.t for e in self.events), default=0.0)]
        ended = self.meta.get("ended_at")
        if isinstance(ended, (int, float)) and ended >= self.started_at > 0:
            ends.append(float(ended) - self.started_at)
        return max(ends)

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
    started = time.mktime(time.strptime(m.group(1), "%Y%m%d-%H%M%S"))
    return {"version": FORMAT_VERSION, "id": m.group(3), "type": m.group(2), "started_at": started,
            "ended_at": None}


def read_events(folder: Path, problems: list[str] | None = None) -> list[Event]:
    """The timeline's events in file order. Lines that are not a JSON object with a numeric "t"
    and a "kind" (a torn last line after a crash) are skipped and said in `problems`."""
    events: list[Event] = []
    try:
        raw = (folder / "timeline.jsonl").read_bytes()
    except OSError:
        return events
    lines = raw.splitlines()
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    for n, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            t, kind = float(obj["t"]), str(obj["kind"])
            if not 0.0 <= t <= MAX_T:  # also NaN
                raise ValueError(t)
        except (ValueError, KeyError, TypeError):
            if problems is not None:
                problems.append("the last timeline entry was cut short (skipped)" if n == last
                                else f"timeline line {n + 1} could not be read (skipped)")
            continue
        events.append(Event(t, kind, {k: v for k, v in obj.items() if k not in ("t", "kind")}))
    return events


def inside(folder: Path, name: Any) -> Path | None:
    """`folder/name` if `name` is a relative path that stays inside the folder and is not a
    half-written `.part` file; else None."""
    if not isinstance(name, str) or not name or name.endswith(".part"):
        return None
    path = (folder / name).resolve()
    root = folder.resolve()
    return path if root in path.parents else None


def open_recording(folder: Path | str) -> Recording:
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
    events = read_events(folder, problems)
    chunks: dict[str, list[Chunk]] = {"user": [], "ai": []}
    frames: list[Frame] = []
    for e in events:
        if e.kind == "audio" and e.data.get("track") in chunks:
            name = e.data.get("file")
            path = inside(folder, name)
            if path is None or not path.is_file():
                problems.append(f"audio chunk {name!r} is missing (skipped)")
                continue
            try:
                chunk = Chunk(path, float(e.data["start"]), float(e.data["duration"]), int(e.data["rate"]))
            except (KeyError, TypeError, ValueError):
                chunk = None
            if chunk is None or not (0 <= chunk.start <= MAX_T and 0 < chunk.duration <= 3600
                                     and 1000 <= chunk.rate <= 384_000):
                problems.append(f"audio chunk {name!r} has no valid start, duration or rate (skipped)")
                continue
            chunks[e.data["track"]].append(chunk)
        elif e.kind == "frame":
            path = inside(folder, e.data.get("file"))
            if path is not None and path.is_file():
                start = _num(e.data.get("start"), e.t)
                frames.append(Frame(start if 0 <= start <= MAX_T else e.t, path))
    frames.sort(key=lambda f: f.t)
    user = Track("user", _rate(meta.get("user_rate"), chunks["user"], 16000), chunks["user"])
    ai = Track("ai", _rate(meta.get("ai_rate"), chunks["ai"], 22050), chunks["ai"])
    notes = [str(e.data.get("text", "")) for e in events if e.kind == "note"]
    return Recording(folder, meta, events, user, ai, frames, build_turns(folder, events), notes, problems)


def build_turns(folder: Path, events: list[Event]) -> list[Turn]:
    """Per turn number: final texts (the streamed deltas when the final one never came), barge-in,
    metrics and images, in the order the turns started."""
    turns: dict[int, Turn] = {}
    deltas: dict[int, list[str]] = {}
    partials: dict[int, str] = {}
    for e in events:
        number = e.data.get("turn")
        if not isinstance(number, int) or isinstance(number, bool):
            continue
        turn = turns.get(number)
        if turn is None:
            turn = turns[number] = Turn(number, e.t)
        text = str(e.data.get("text") or "")
        if e.kind == "user_text":
            turn.user_text = text
        elif e.kind == "user_partial":
            partials[number] = text
        elif e.kind == "assistant_delta":
            deltas.setdefault(number, []).append(text)
        elif e.kind == "assistant_text":
            turn.assistant_text = text
            if isinstance(e.data.get("heard"), str):
                turn.heard = e.data["heard"]
        elif e.kind == "barge_in":
            turn.barge_in_t = e.t
            if turn.heard is None and isinstance(e.data.get("heard"), str):
                turn.heard = e.data["heard"]
        elif e.kind == "turn_metrics":
            turn.metrics.update({k: v for k, v in e.data.items() if k != "turn"})
        elif e.kind == "image":
            path = inside(folder, e.data.get("file"))
            if path is not None and path.is_file():
                turn.images.append(path)
    for number, turn in turns.items():
        if not turn.user_text and number in partials:
            turn.user_text = partials[number]
        if not turn.assistant_text and number in deltas:
            turn.assistant_text = "".join(deltas[number])
    return sorted(turns.values(), key=lambda t: (t.start, t.turn))


def _num(value: Any, default: float) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def _rate(value: Any, chunks: list[Chunk], default: int) -> int:
    if isinstance(value, int) and value > 0:
        return value
    return chunks[0].rate if chunks else default
