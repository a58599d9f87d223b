"""Saved conversations: one JSON file per conversation in the user data folder, written
atomically; a file that cannot be read is skipped with a warning and left on disk (no Qt)."""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator

log = logging.getLogger(__name__)

APP = "omnidesk"
FORMAT_VERSION = 1
TITLE_CHARS = 40
ROLES = ("user", "assistant", "system")
_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def data_dir() -> Path:
    """The user data folder (`OMNIDESK_DATA_DIR` overrides the platform default)."""
    from platformdirs import user_data_dir

    return Path(os.environ.get("OMNIDESK_DATA_DIR") or user_data_dir(APP))


def title_from(text: str) -> str:
    """A conversation title from its first user message: one line, about 40 characters."""
    flat = " ".join(text.split())
    if len(flat) <= TITLE_CHARS:
        return flat
    cut = flat[:TITLE_CHARS]
    if " " in cut[TITLE_CHARS // 2:]:  # end on a word when that keeps most of the text
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,.;:-") + "…"


@dataclass(slots=True)
class StoredMessage:
    """One saved message; `stats` holds the TokenStats of an assistant reply (as a dict);
    `images` the paths of images attached to a user message."""

    role: str
    content: str
    stats: dict[str, Any] | None = None
    created: float = field(default_factory=time.time)
    images: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Conversation:
    """A saved conversation. `title` is "" until the first user message names it (or a rename);
    `parent` is the conversation an edit branched from."""

    id: str
    title: str = ""
    created: float = field(default_factory=time.time)
    updated: float = field(default_factory=time.time)
    system_prompt: str = ""
    preset: str = ""
    messages: list[StoredMessage] = field(default_factory=list)
    parent: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"version": FORMAT_VERSION, **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Conversation:
        """Parse a saved file's object; raise ValueError when it is not a conversation."""
        if not isinstance(data, dict) or not isinstance(data.get("id"), str) or not _ID.match(data["id"]):
            raise ValueError("not a conversation object (no valid id)")
        raw = data.get("messages", [])
        if not isinstance(raw, list):
            raise ValueError("messages is not a list")
        messages = []
        for m in raw:
            if not isinstance(m, dict) or m.get("role") not in ROLES or not isinstance(m.get("content"), str):
                raise ValueError("a message has no valid role/content")
            stats = m.get("stats") if isinstance(m.get("stats"), dict) else None
            images = [str(p) for p in m.get("images", []) if isinstance(p, str)] if isinstance(m.get("images"), list) else []
            messages.append(StoredMessage(m["role"], m["content"], stats, float(m.get("created", 0.0)), images))
        return cls(id=data["id"], title=str(data.get("title", "")), created=float(data.get("created", 0.0)),
                   updated=float(data.get("updated", 0.0)), system_prompt=str(data.get("system_prompt", "")),
                   preset=str(data.get("preset", "")), messages=messages, parent=data.get("parent"))


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to a temporary file beside `path`, flush it to disk, then os.replace it in:
    readers see the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class ConversationStore:
    """Conversations under `root`, one `<id>.json` each. Everything is read once at start and
    kept in memory; every change is written through at once."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._convs: dict[str, Conversation] = {}
        self.skipped: list[Path] = []  # files that could not be read (left untouched)
        for path in sorted(self.root.glob("*.json")):
            try:
                conv = Conversation.from_dict(json.loads(path.read_text(encoding="utf-8")))
                if conv.id != path.stem:
                    raise ValueError(f"its id {conv.id!r} does not match the file name")
            except (OSError, ValueError) as exc:
                log.warning("Skipped conversation file %s: %s (the file is kept as it is)", path, exc)
                self.skipped.append(path)
                continue
            self._convs[conv.id] = conv

    @classmethod
    def default(cls) -> ConversationStore:
        return cls(data_dir() / "conversations")

    def __contains__(self, conv_id: object) -> bool:
        return conv_id in self._convs

    def __iter__(self) -> Iterator[Conversation]:
        return iter(self.list())

    def list(self) -> list[Conversation]:
        """Every saved conversation, the most recently updated first."""
        return sorted(self._convs.values(), key=lambda c: (c.updated, c.created), reverse=True)

    def get(self, conv_id: str) -> Conversation | None:
        return self._convs.get(conv_id)

    def search(self, query: str) -> list[Conversation]:
        """Conversations whose title contains `query` (case-insensitive); all for an empty query."""
        q = query.strip().casefold()
        return [c for c in self.list() if q in (c.title or "").casefold()]

    def new(self, system_prompt: str = "", preset: str = "") -> Conversation:
        """A new, empty conversation. It is not saved (nor listed) until `save`."""
        return Conversation(id=uuid.uuid4().hex, system_prompt=system_prompt, preset=preset)

    def save(self, conv: Conversation) -> None:
        """Write `conv` (and list it): it becomes the most recently updated. An untitled
        conversation is named after its first user message."""
        if not _ID.match(conv.id):
            raise ValueError(f"Invalid conversation id {conv.id!r}.")
        if not conv.title:
            first = next((m.content for m in conv.messages if m.role == "user" and m.content.strip()), "")
            conv.title = title_from(first)
        conv.updated = max(time.time(), conv.updated)
        self._write(conv)

    def rename(self, conv_id: str, title: str) -> Conversation:
        """Give a conversation a title of the user's; an empty title is refused (ValueError)."""
        conv = self._need(conv_id)
        title = " ".join(title.split())
        if not title:
            raise ValueError("A conversation title cannot be empty.")
        conv.title = title
        self._write(conv)
        return conv

    def delete(self, conv_id: str) -> None:
        """Remove a conversation and its file (nothing happens for an unknown id)."""
        if self._convs.pop(conv_id, None) is not None:
            (self.root / f"{conv_id}.json").unlink(missing_ok=True)

    def fork(self, conv: Conversation, upto_index: int, new_user_text: str) -> Conversation:
        """A new branch: `conv`'s messages before `upto_index` (a user message) followed by that
        message with `new_user_text` (and its images). It is saved; `conv` is left as it was."""
        if not 0 <= upto_index < len(conv.messages) or conv.messages[upto_index].role != "user":
            raise ValueError(f"Message {upto_index} is not a user message of this conversation.")
        kept = [StoredMessage(m.role, m.content, dict(m.stats) if m.stats else None, m.created, list(m.images))
                for m in conv.messages[:upto_index]]
        branch = self.new(conv.system_prompt, conv.preset)
        branch.parent = conv.id
        branch.messages = kept + [StoredMessage("user", new_user_text, images=list(conv.messages[upto_index].images))]
        first_user = next(i for i, m in enumerate(conv.messages) if m.role == "user")
        if upto_index > first_user and conv.title:
            branch.title = conv.title.removesuffix(" (branch)") + " (branch)"
        self.save(branch)
        return branch

    def _need(self, conv_id: str) -> Conversation:
        conv = self._convs.get(conv_id)
        if conv is None:
            raise KeyError(f"No conversation {conv_id!r}.")
        return conv

    def _write(self, conv: Conversation) -> None:
        write_atomic(self.root / f"{conv.id}.json", json.dumps(conv.to_dict(), ensure_ascii=False, indent=1))
        self._convs[conv.id] = conv
