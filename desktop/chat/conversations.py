"""Saved conversations: one JSON file per conversation in the user data folder, written
atomically; a file that cannot be read is moved to set-aside/ with a notice, the others load (no Qt)."""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from desktop.chat.saved_fields import clean_text, reply_stats, timestamp
from desktop.chat.search import Hit, SearchIndex
from desktop.chat.image_store import ImageStore
from desktop.chat.branches import Branch
from desktop.chat.reply_versions import ReplyVersion
from desktop.safefile import clean_stale_temps, load_json, set_aside, shorten, write_atomic

log = logging.getLogger(__name__)

APP = "omnidesk"
FORMAT_VERSION = 1
TITLE_CHARS = 40
ROLES = ("user", "assistant", "system", "tool")
MAX_FILE_BYTES = 64 << 20  # one conversation file; a larger one is set aside unread
SET_ASIDE = "set-aside"  # the folder, under the store's, where unreadable files are moved
STREAMING, INTERRUPTED = "streaming", "interrupted"  # StoredMessage.status of an unfinished reply
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
    `images` the paths of images attached to a user message. `status` of a reply: "" when it is
    whole (finished or stopped), STREAMING while it is being written (saved as it streams), and
    INTERRUPTED when its writing ended early (a crash: a STREAMING reply read back at start).
    `versions`: the other kept versions of a regenerated reply, `shown` where this one (its
    content and stats) sits among them (see reply_versions.py). `branches`: of a user message that
    was edited, the other branches that start here, `branch` where the shown one sits among them
    (see branches.py). None of them in files written before."""

    role: str
    content: str
    stats: dict[str, Any] | None = None
    created: float = field(default_factory=time.time)
    images: list[str] = field(default_factory=list)
    status: str = ""
    versions: list[ReplyVersion] = field(default_factory=list)
    shown: int = 0
    branches: list[Branch] = field(default_factory=list)
    branch: int = 0
    call: dict[str, Any] | None = None  # a tool message's call: id, name, arguments, ok, seconds, decision

    def copy(self) -> StoredMessage:
        """A copy that shares nothing that changes with this one."""
        return StoredMessage(self.role, self.content, dict(self.stats) if self.stats else None, self.created,
                             list(self.images), self.status,
                             [ReplyVersion(v.content, dict(v.stats) if v.stats else None, v.created)
                              for v in self.versions], self.shown,
                             [Branch([m.copy() for m in b.messages]) for b in self.branches], self.branch,
                             dict(self.call) if self.call else None)


@dataclass(slots=True)
class Conversation:
    """A saved conversation. `title` is "" until the first user message names it (or a rename);
    `parent`: the conversation an edit branched from, in files of versions that made an edit a new
    conversation (an edit is now a branch inside it, see branches.py)."""

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
    def from_dict(cls, data: Any, fallback_time: float = 0.0) -> Conversation:
        """Parse a saved file's object. What the user wrote or received (id, messages, system
        prompt) must be valid, else ValueError; bad metadata (title, times, preset, parent, stats,
        images, a reply's versions) falls back to a default so that it can never break the page later."""
        if not isinstance(data, dict) or not isinstance(data.get("id"), str) or not _ID.match(data["id"]):
            raise ValueError("it is not a conversation (no valid id)")
        raw = data.get("messages", [])
        if not isinstance(raw, list):
            raise ValueError("its messages are not a list")
        updated = timestamp(data.get("updated"))
        created = timestamp(data.get("created")) or updated or fallback_time
        messages = [_message(m, f"message {i + 1}", created) for i, m in enumerate(raw)]
        system = data.get("system_prompt", "")
        if not isinstance(system, str):
            raise ValueError("its system prompt is not text")
        title, preset, parent = data.get("title"), data.get("preset"), data.get("parent")
        return cls(id=data["id"], title=clean_text(title) if isinstance(title, str) else "", created=created,
                   updated=updated or created, system_prompt=clean_text(system),
                   preset=clean_text(preset) if isinstance(preset, str) else "", messages=messages,
                   parent=parent if isinstance(parent, str) and _ID.match(parent) else None)


class ConversationStore:
    """Conversations under `root`, one `<id>.json` each. Everything is read once at start and
    kept in memory; every change is written through at once."""

    def __init__(self, root: Path | str, *, on_delete: Callable[[str], None] | None = None) -> None:
        self.root = Path(root)
        self._on_delete = on_delete  # told each deleted conversation's id (its KV snapshots go too)
        self.root.mkdir(parents=True, exist_ok=True)
        self.images = ImageStore(self.root / "images")  # attached images, by content hash
        self._convs: dict[str, Conversation] = {}
        self._index = SearchIndex()  # folded text per conversation, for `find`
        self._stamps: dict[str, int] = {}  # the newest version taken of each conversation
        self._written: dict[str, int] = {}  # the version on disk (saves come from two threads)
        self._write_lock = threading.Lock()
        self.skipped: list[Path] = []  # files that could not be read, where they are now
        self.notice: str | None = None  # one paragraph for the user about them, if any
        clean_stale_temps(self.root)
        problems: list[tuple[Path, str]] = []
        for path in sorted(self.root.glob("*.json")):
            if path.is_dir():  # not one of ours
                continue
            try:
                conv = Conversation.from_dict(load_json(path, MAX_FILE_BYTES), _mtime(path))
                if conv.id != path.stem:
                    raise ValueError(f"its id {shorten(conv.id)!r} does not match the file name")
                self._adopt_images(conv.messages)
            except Exception as exc:  # noqa: BLE001 - whatever is wrong with one file, the others load
                problems.append((path, str(exc) if isinstance(exc, (OSError, ValueError)) else repr(exc)))
                continue
            self._convs[conv.id] = conv
        if problems:
            self._set_aside(problems)

    def _adopt_images(self, messages: list[StoredMessage]) -> None:
        """Point every image of these messages, and of their branches, into the image store: only
        its own files are ever read as images (a file may name any path)."""
        for m in messages:
            m.images = [self.images.adopt(p) for p in m.images]
            for branch in m.branches:
                self._adopt_images(branch.messages)

    def _set_aside(self, problems: list[tuple[Path, str]]) -> None:
        """Move unreadable files to set-aside/ (never delete them) and word the notice."""
        folder = self.root / SET_ASIDE
        lines, stuck = [], []
        for path, why in problems:
            try:
                where = set_aside(path, folder)
            except OSError as exc:
                log.warning("Could not move the unreadable conversation file %s aside: %s", path, exc)
                where = path
                stuck.append(path.name)
            log.warning("Conversation file %s could not be read (%s); it was kept as %s", path, why, where)
            self.skipped.append(where)
            lines.append(f"{path.name} ({shorten(why, 120)})")
        many = len(lines) > 1
        listed = "; ".join(lines[:5]) + (f"; and {len(lines) - 5} more" if len(lines) > 5 else "")
        moved = (f" {'They were' if many else 'It was'} moved to {folder}." if not stuck else
                 f" They are kept: in {folder}, or where they were for {', '.join(stuck[:5])}.")
        self.notice = (f"{len(lines)} conversation file{'s' if many else ''} could not be read: {listed}."
                       f"{moved} Your other conversations are loaded.")

    @classmethod
    def default(cls, *, on_delete: Callable[[str], None] | None = None) -> ConversationStore:
        return cls(data_dir() / "conversations", on_delete=on_delete)

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
        """Conversations whose title and messages contain every word of `query` (any case), the
        newest first; all for an empty query."""
        return [hit.conv for hit in self.find(query)]

    def find(self, query: str) -> list[Hit]:
        """Like `search`, each with where its messages matched (see chat/search.py)."""
        return self._index.search(self.list(), query)

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
        """Remove a conversation and its file (nothing happens for an unknown id), then tell
        `on_delete` (what else was kept for it goes too)."""
        if self._convs.pop(conv_id, None) is not None:
            (self.root / f"{conv_id}.json").unlink(missing_ok=True)
            if self._on_delete is not None:
                self._on_delete(conv_id)

    def _need(self, conv_id: str) -> Conversation:
        conv = self._convs.get(conv_id)
        if conv is None:
            raise KeyError(f"No conversation {conv_id!r}.")
        return conv

    def stamp(self, conv_id: str) -> int:
        """Number a version of a conversation at the moment its content is taken (on the thread
        that changes it); a write of an older version never replaces a newer one on disk."""
        self._stamps[conv_id] = self._stamps.get(conv_id, 0) + 1
        return self._stamps[conv_id]

    def write_snapshot(self, snapshot: Conversation, stamp: int | None = None) -> None:
        """Write a copy of a saved conversation that nobody changes meanwhile, from any thread (a
        reply's checkpoints are written off the Qt thread); the store keeps its own object, and a
        conversation deleted meanwhile is not written back. `stamp`: from `stamp()` when the copy
        was taken; a version newer than it already on disk wins."""
        if snapshot.id in self._convs:
            self._write_file(snapshot, self.stamp(snapshot.id) if stamp is None else stamp)

    def _write(self, conv: Conversation) -> None:
        self._write_file(conv, self.stamp(conv.id))
        self._convs[conv.id] = conv

    def _write_file(self, conv: Conversation, stamp: int) -> None:
        with self._write_lock:  # one write at a time, and never an older version over a newer
            if stamp <= self._written.get(conv.id, 0):
                return
            self._write_json(conv)
            self._written[conv.id] = stamp

    def _write_json(self, conv: Conversation) -> None:
        data = conv.to_dict()
        text = json.dumps(data, ensure_ascii=False, indent=1)
        try:
            raw = text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate somewhere: escaped, it is still valid JSON
            raw = json.dumps(data, indent=1).encode("ascii")
        write_atomic(self.root / f"{conv.id}.json", raw)


def _message(m: Any, where: str, fallback_time: float) -> StoredMessage:
    """One saved message (`where` names it in the error), with a reply's versions and the branches
    that start at a user message (each parsed as messages, recursively)."""
    if not isinstance(m, dict) or m.get("role") not in ROLES or not isinstance(m.get("content"), str):
        raise ValueError(f"{where} has no valid role and text")
    images = m.get("images") if isinstance(m.get("images"), list) else []
    unfinished = m.get("status") in (STREAMING, INTERRUPTED) and m["role"] == "assistant"
    when = timestamp(m.get("created")) or fallback_time
    raw_versions = m.get("versions") if isinstance(m.get("versions"), list) and m["role"] == "assistant" else []
    versions = [v for v in (ReplyVersion.parse(r, when) for r in raw_versions) if v is not None]
    raw_branches = m.get("branches") if isinstance(m.get("branches"), list) and m["role"] == "user" else []
    branches = []
    for j, b in enumerate(raw_branches):  # what the user wrote: a damaged branch sets the file aside
        inner = b.get("messages") if isinstance(b, dict) else None
        if not isinstance(inner, list) or not inner:
            raise ValueError(f"branch {j + 1} of {where} has no messages")
        kept = [_message(x, f"message {n + 1} of branch {j + 1} of {where}", when) for n, x in enumerate(inner)]
        if kept[0].role != "user":
            raise ValueError(f"branch {j + 1} of {where} does not start with a user message")
        branches.append(Branch(kept))
    return StoredMessage(m["role"], clean_text(m["content"]), reply_stats(m.get("stats")), when,
                         [clean_text(p) for p in images if isinstance(p, str) and p and "\0" not in p],
                         INTERRUPTED if unfinished else "",  # whoever was writing it is gone
                         versions, _index(m.get("shown"), len(versions)),
                         branches, _index(m.get("branch"), len(branches)), _call(m))


def _call(m: dict[str, Any]) -> dict[str, Any] | None:
    """A tool message's call (None for others); one without a call id is given one."""
    if m["role"] != "tool":
        return None
    call = m.get("call") if isinstance(m.get("call"), dict) else {}
    call = {k: v for k, v in call.items() if isinstance(k, str) and isinstance(v, (str, int, float, bool))}
    if not isinstance(call.get("id"), str) or not call["id"]:
        call["id"] = "call_saved"
    return call


def _index(value: Any, others: int) -> int:
    """Where the shown one of `others` + 1 sits; a bad value: the last."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= others else others


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
