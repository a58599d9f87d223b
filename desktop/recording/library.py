"""The recordings on disk as a list: one summary per folder (date, type, duration, size, title,
first words, still being recorded or not), and the two things done to a whole folder: delete it,
export it as a zip. Which recordings are being written now is not read from the disk (a crashed
run's folder looks the same): the caller passes the folders its recorder has open."""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from desktop.errors import OmnideskError
from desktop.recording.reader import meta_from_name, read_meta
from desktop.recording.sane import check_meta, epoch, offset
from desktop.recording.zipnames import MemberNames

log = logging.getLogger(__name__)
_TAIL = 64 * 1024  # the end of a timeline read for the last event's time


@dataclass(frozen=True, slots=True)
class Summary:
    folder: Path
    kind: str  # "call" | "chat"
    title: str
    first_words: str
    started_at: float  # epoch seconds
    duration: float  # seconds
    size: int  # bytes on disk
    complete: bool  # False: still recording (`live`), or the app stopped before its end
    video: bool
    live: bool = False  # being recorded now by this app (else an unfinished one was cut short)
    damaged: str = ""  # what is wrong with its meta.json (impossible times): shown, never raised

    @property
    def name(self) -> str:
        return self.folder.name


def is_recording(folder: Path) -> bool:
    return folder.is_dir() and ((folder / "meta.json").is_file() or (folder / "timeline.jsonl").is_file())


def live_names(folders: Iterable[Path | str]) -> frozenset[str]:
    """The folder names of recordings being written now (names are unique: stamp + session id)."""
    return frozenset(Path(f).name for f in folders)


def scan(root: Path | str, live: Iterable[Path | str] = ()) -> list[Summary]:
    """Every recording under `root`, newest first ([] when the folder does not exist). `live`:
    the folders being recorded now (an unfinished one not among them was cut short)."""
    root, names = Path(root), live_names(live)
    try:
        entries = list(os.scandir(root))
    except OSError:
        return []
    found = [s for e in entries
             if e.is_dir(follow_symlinks=False) and (s := summarize(Path(e.path), e.name in names)) is not None]
    return sorted(found, key=lambda s: (s.started_at, s.name), reverse=True)


def summarize(folder: Path, live: bool = False) -> Summary | None:
    """The list row of one recording folder; None when it is not one. `live`: being recorded now
    (it counts only while the folder has no end written)."""
    if not is_recording(folder):
        return None
    meta, problems = check_meta(read_meta(folder) or meta_from_name(folder))
    started = epoch(meta.get("started_at")) or epoch(meta_from_name(folder).get("started_at")) or 0.0
    ended = epoch(meta.get("ended_at"))
    if ended is not None and started > 0 and ended >= started:
        duration, complete = ended - started, True
    else:
        duration, complete = last_time(folder / "timeline.jsonl", problems), ended is not None
    return Summary(folder, "chat" if meta.get("type") == "chat" else "call", _text(meta.get("title")),
                   _text(meta.get("first_words")), started, duration, folder_size(folder), complete,
                   meta.get("video") is True, live and not complete, "; ".join(problems))


def last_time(timeline: Path, problems: list[str] | None = None) -> float:
    """The latest `t` among the last events of a timeline (0 when there is none); events from
    several threads are appended nearly, not exactly, in time order. A `t` that is no time (NaN,
    1e999, past a week) is left out and said in `problems`."""
    try:
        with timeline.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - _TAIL))
            lines = f.read().splitlines()
    except OSError:
        return 0.0
    latest = 0.0
    for line in lines:
        try:
            t = offset(json.loads(line)["t"])
        except (ValueError, KeyError, TypeError, RecursionError):
            continue  # a torn last line, or the first (cut) line of the tail
        if t is not None:  # not NaN, ±inf (1e999 reads as inf) or past a week
            latest = max(latest, t)
        elif problems is not None and not any(p.startswith("the timeline") for p in problems):
            problems.append("the timeline has an impossible time")
    return latest


def folder_size(folder: Path) -> int:
    total = 0
    for base, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(base, name)).st_size
            except OSError:
                pass
    return total


def delete(root: Path | str, folder: Path | str) -> None:
    """Delete one recording folder. Refuses anything that is not a recording directly inside
    `root` (a symlink, the root itself, a folder elsewhere). Raises OmnideskError."""
    root, folder = Path(root).resolve(), Path(folder)
    if folder.is_symlink() or folder.resolve().parent != root or not is_recording(folder):
        raise OmnideskError(f"“{folder.name}” is not a recording in {root}; nothing was deleted.")
    try:
        shutil.rmtree(folder)
    except OSError as exc:
        raise OmnideskError(f"Could not delete the recording “{folder.name}”: {exc.strerror or exc}") from exc


def export_zip(folder: Path | str, dest: Path | str) -> Path:
    """Write the recording as a zip at `dest` (files under a folder of the recording's name;
    half-written `.part` files and links left out). Every member name is made safe to unzip on any
    system (zipnames: no `..`, drive, backslash or absolute name). The zip appears whole or not at
    all. Raises OmnideskError."""
    folder, dest = Path(folder), Path(dest)
    if not is_recording(folder):
        raise OmnideskError(f"“{folder.name}” is not a recording.")
    tmp = ""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
        os.close(fd)
        names = MemberNames()
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
            for path in _files(folder):
                packed = path.suffix.lower() in (".jpg", ".jpeg", ".mp4", ".png")  # already compressed
                z.write(path, names.name((folder.name, *path.relative_to(folder).parts)),
                        compress_type=zipfile.ZIP_STORED if packed else zipfile.ZIP_DEFLATED)
        os.replace(tmp, dest)
    except OSError as exc:
        if tmp:
            Path(tmp).unlink(missing_ok=True)
        raise OmnideskError(f"Could not export the recording to {dest}: {exc.strerror or exc}") from exc
    return dest


def _files(folder: Path) -> list[Path]:
    """The regular files under `folder`, sorted, never through a link; `.part` files left out."""
    found = []
    for base, dirs, files in os.walk(folder):  # does not follow links to folders
        dirs.sort()
        for name in files:
            path = Path(base, name)
            if not name.endswith(".part") and path.is_file() and not path.is_symlink():
                found.append(path)
    return sorted(found)


def _text(value: object) -> str:
    """A title or first words as text (a number or list in meta.json is damage, not a crash)."""
    return value if isinstance(value, str) else ""
