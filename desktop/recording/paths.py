"""Where recordings live and how their folders are named (format v1, docs: recording-format):
`<user data dir>/recordings/<YYYYmmdd-HHMMSS>-<call|chat>-<id8>/`."""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path

FORMAT_VERSION = 1
KINDS = ("call", "chat")
META, TIMELINE = "meta.json", "timeline.jsonl"
USER_AUDIO, AI_AUDIO, USER_FRAMES, USER_IMAGES = "user_audio", "ai_audio", "user_frames", "user_images"
REPLAY_AUDIO, REPLAY_VIDEO = "replay.wav", "replay.mp4"
PART = ".part"  # a chunk being written; renamed to its final name once complete
FOLDER = re.compile(r"^(\d{8}-\d{6})-(call|chat)-([0-9a-f]{8})$")


def default_root() -> Path:
    """`recordings/` in the user data folder (the same base as the saved conversations)."""
    from desktop.chat.conversations import data_dir

    return data_dir() / "recordings"


def new_folder(root: Path, kind: str, started_at: float, session_id: str | None = None) -> tuple[Path, str]:
    """(folder path, session id hex) for a new session; the folder is not created here."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
    sid = session_id or uuid.uuid4().hex
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(started_at))
    return Path(root) / f"{stamp}-{kind}-{sid[:8]}", sid


def is_session_folder(path: Path) -> bool:
    """Whether `path` is named like a session folder (retention deletes nothing else)."""
    return path.is_dir() and FOLDER.match(path.name) is not None


def folder_time(path: Path) -> float | None:
    """The start time encoded in a session folder's name (local time), or None."""
    m = FOLDER.match(path.name)
    if m is None:
        return None
    try:
        return time.mktime(time.strptime(m.group(1), "%Y%m%d-%H%M%S"))
    except (ValueError, OverflowError):
        return None


def chunk_name(track_dir: str, index: int, ext: str) -> str:
    """`user_audio/000001.wav`: relative to the session folder, numbered from 1."""
    return f"{track_dir}/{index:06d}.{ext}"
