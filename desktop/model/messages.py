"""Chat messages: validation of what callers send, and the canonical form used for hashing.

Only text content is accepted for now; image parts are refused with a clear message."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from desktop.errors import InvalidRequest

ROLES = ("system", "user", "assistant")


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message. `content` is plain text."""

    role: str
    content: str

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise InvalidRequest(f"Unknown role {self.role!r}: use one of {', '.join(ROLES)}.")
        if not isinstance(self.content, str):
            raise InvalidRequest(
                f"A {self.role} message must have text content (got {type(self.content).__name__})."
            )

    def canonical(self) -> bytes:
        """Stable bytes for hashing: role and content only."""
        return json.dumps([self.role, self.content], ensure_ascii=False).encode()


def _text_of(content: Any, role: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) for p in content):
        kinds = {p.get("type") for p in content}
        if kinds <= {"text"}:
            return "".join(str(p.get("text", "")) for p in content)
        other = ", ".join(sorted(str(k) for k in kinds - {"text"}))
        raise InvalidRequest(f"This model takes text only; the {role} message contains: {other}.")
    raise InvalidRequest(f"A {role} message must have text content (got {type(content).__name__}).")


def parse_messages(raw: Iterable[Any]) -> tuple[Message, ...]:
    """Validate a list of dicts (or Messages) into Messages; raise InvalidRequest with a clear reason."""
    if isinstance(raw, (str, bytes)):
        raise InvalidRequest("Messages must be a list of {role, content} objects, not a string.")
    out: list[Message] = []
    for i, m in enumerate(raw):
        if isinstance(m, Message):
            out.append(m)
            continue
        if not isinstance(m, dict) or "role" not in m or "content" not in m:
            raise InvalidRequest(f"Message {i + 1} must be an object with 'role' and 'content'.")
        role = m["role"]
        if role not in ROLES:
            raise InvalidRequest(f"Message {i + 1} has unknown role {role!r}: use one of {', '.join(ROLES)}.")
        out.append(Message(role, _text_of(m["content"], role)))
    if not out:
        raise InvalidRequest("The conversation is empty: send at least one message.")
    return tuple(out)


def prefix_hashes(messages: Sequence[Message], start: bytes = b"") -> list[bytes]:
    """Chained SHA-256 over the messages: element k is the hash of messages[:k+1].

    The hash of a history (all messages but the last) is `prefix_hashes(m)[-2]`; the same chain lets a
    slot answer "do I hold messages[:k]?" for every k with one comparison each."""
    hashes: list[bytes] = []
    h = start
    for m in messages:
        h = hashlib.sha256(h + m.canonical()).digest()
        hashes.append(h)
    return hashes


def history_hash(messages: Sequence[Message]) -> bytes:
    """SHA-256 chain over all messages but the last (b'' for a single message)."""
    return prefix_hashes(messages[:-1])[-1] if len(messages) > 1 else b""
