"""Chat messages: validation of what callers send (roles, text that is valid UTF-8, size limits
checked before any tokenizing), and the canonical form used for hashing.

Only text content is accepted for now; image parts are refused with a clear message."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from desktop.errors import ContextOverflow, InvalidRequest

ROLES = ("system", "user", "assistant")
CHARS_PER_TOKEN = 8  # generous: text averages about 4 characters per token
MAX_CHARS = 2_000_000  # per request whatever the context: tokenizing more would take seconds


def char_limit(context_tokens: int | None) -> int:
    """The most characters one request may carry for a model with this context window (None or 0:
    not known yet). Checked before tokenizing, so a pasted novel is refused in microseconds."""
    return min(CHARS_PER_TOKEN * context_tokens, MAX_CHARS) if context_tokens else MAX_CHARS


def first_unencodable(text: str) -> str | None:
    """Where `text` cannot be encoded as UTF-8 (a lone surrogate), in words; None when it can."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        return f"a lone surrogate (U+{ord(text[err.start]):04X}) at character {err.start + 1}"
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message. `content` is plain text that can be encoded as UTF-8."""

    role: str
    content: str

    def __post_init__(self) -> None:
        if not isinstance(self.role, str) or self.role not in ROLES:
            raise InvalidRequest(f"Unknown role {_short(self.role)}: use one of {', '.join(ROLES)}.")
        if not isinstance(self.content, str):
            raise InvalidRequest(
                f"A {self.role} message must have text content (got {type(self.content).__name__})."
            )
        bad = first_unencodable(self.content)
        if bad is not None:
            raise InvalidRequest(f"The {self.role} message contains {bad}, which is not valid text; remove it.")

    def canonical(self) -> bytes:
        """Stable bytes for hashing: role and content only."""
        return json.dumps([self.role, self.content], ensure_ascii=False).encode()


def _text_of(content: Any, role: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) for p in content):
        kinds = {p.get("type") for p in content}
        if kinds <= {"text"}:
            texts = [p.get("text", "") for p in content]
            if not all(isinstance(t, str) for t in texts):
                raise InvalidRequest(f"Every text part of a {role} message must be text.")
            return "".join(texts)
        other = ", ".join(sorted(str(k) for k in kinds - {"text"}))
        raise InvalidRequest(f"This model takes text only; the {role} message contains: {other}.")
    raise InvalidRequest(f"A {role} message must have text content (got {type(content).__name__}).")


def limit_words(max_chars: int) -> str:
    """The limit in words for an error message, e.g. "16,384 characters (8 per token of …)"."""
    if max_chars < MAX_CHARS and max_chars % CHARS_PER_TOKEN == 0:
        tokens = max_chars // CHARS_PER_TOKEN
        return f"{max_chars:,} characters ({CHARS_PER_TOKEN} per token of the model's {tokens:,}-token context)"
    return f"{max_chars:,} characters"


def parse_messages(raw: Iterable[Any], max_chars: int = MAX_CHARS) -> tuple[Message, ...]:
    """Validate a list of dicts (or Messages) into Messages; raise InvalidRequest with a clear reason.

    Sizes are checked first (each message and the whole list against `max_chars`), then roles and
    text, so an oversized request costs no more than counting its characters."""
    if isinstance(raw, (str, bytes, Mapping)) or not isinstance(raw, Iterable):
        kind = "a string" if isinstance(raw, (str, bytes)) else type(raw).__name__
        raise InvalidRequest(f"Messages must be a list of {{role, content}} objects, not {kind}.")
    items: list[tuple[Any, str, Message | None]] = []
    for i, m in enumerate(raw):
        if isinstance(m, Message):  # re-checked: one may have crossed a pipe or been built around checks
            role, content = m.role, m.content
        elif isinstance(m, dict) and "role" in m and "content" in m:
            role, content = m["role"], m["content"]
        else:
            raise InvalidRequest(f"Message {i + 1} must be an object with 'role' and 'content'.")
        if not isinstance(role, str) or role not in ROLES:
            raise InvalidRequest(f"Message {i + 1} has unknown role {_short(role)}: use one of {', '.join(ROLES)}.")
        text = _text_of(content, role)
        if len(text) > max_chars:
            raise ContextOverflow(f"Message {i + 1} is {len(text):,} characters long; the limit is "
                                  f"{limit_words(max_chars)}. Shorten it or send it in parts.")
        items.append((role, text, m if isinstance(m, Message) else None))
    total = sum(len(text) for _, text, _ in items)
    if total > max_chars:
        raise ContextOverflow(f"The conversation is {total:,} characters long; the limit is "
                              f"{limit_words(max_chars)}. Start a new conversation or shorten the messages.")
    out: list[Message] = []
    for i, (role, text, message) in enumerate(items):
        bad = first_unencodable(text)
        if bad is not None:
            raise InvalidRequest(f"Message {i + 1} ({role}) contains {bad}, which is not valid text; remove it.")
        out.append(message or Message(role, text))
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
