"""Chat messages: validation of what callers send (roles, text that is valid UTF-8, size limits
checked before any tokenizing), and the canonical form used for hashing.

Content is text, or OpenAI-style parts: text parts, and image parts in user messages (see
images.image_part). A message's images come first, then its text (the way chat apps attach them);
whether the model can see them is the chat template's check (chat_template.ChatTemplate)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from desktop.errors import ContextOverflow, InvalidRequest
from desktop.model.image_door import check_count
from desktop.model.images import MAX_IMAGES, ImageData, image_part

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
    """One chat message. `content` is plain text that can be encoded as UTF-8; `images` (user
    messages only) come before it."""

    role: str
    content: str
    images: tuple[ImageData, ...] = ()

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
        if self.images:
            if self.role != "user":
                raise InvalidRequest(f"Only user messages may carry images (a {self.role} message has {len(self.images)}).")
            if not all(isinstance(i, ImageData) for i in self.images):
                raise InvalidRequest("Images must be checked ImageData (see desktop.model.images).")

    def canonical(self) -> bytes:
        """Stable bytes for hashing: role, content and the SHA-256 of each image (so a different
        image is a different message)."""
        if not self.images:
            return json.dumps([self.role, self.content], ensure_ascii=False).encode()
        return json.dumps([self.role, self.content, [i.sha256.hex() for i in self.images]], ensure_ascii=False).encode()


IMAGE_PARTS = ("image", "image_url")


def _parts_of(content: Any, role: str, i: int) -> tuple[str, tuple[ImageData, ...]]:
    """(text, images) of a message's content: a string, or a list of text and image parts."""
    if isinstance(content, str):
        return content, ()
    if isinstance(content, (list, tuple)) and all(isinstance(p, dict) for p in content):
        kinds = {p.get("type") for p in content}
        if not kinds <= {"text", *IMAGE_PARTS}:
            other = ", ".join(sorted(str(k) for k in kinds - {"text", *IMAGE_PARTS}))
            raise InvalidRequest(f"The {role} message contains parts of a kind this app does not take: {other}.")
        texts = [p.get("text", "") for p in content if p.get("type") == "text"]
        if not all(isinstance(t, str) for t in texts):
            raise InvalidRequest(f"Every text part of a {role} message must be text.")
        pictures = [p for p in content if p.get("type") in IMAGE_PARTS]
        if pictures and role != "user":
            raise InvalidRequest(f"Only user messages may carry images (message {i + 1} is a {role} message).")
        images = tuple(image_part(p, f"Image {n + 1} of message {i + 1}") for n, p in enumerate(pictures))
        return "".join(texts), images
    raise InvalidRequest(f"A {role} message must have text content (got {type(content).__name__}).")


def limit_words(max_chars: int) -> str:
    """The limit in words for an error message, e.g. "16,384 characters (8 per token of …)"."""
    if max_chars < MAX_CHARS and max_chars % CHARS_PER_TOKEN == 0:
        tokens = max_chars // CHARS_PER_TOKEN
        return f"{max_chars:,} characters ({CHARS_PER_TOKEN} per token of the model's {tokens:,}-token context)"
    return f"{max_chars:,} characters"


def parse_messages(raw: Iterable[Any], max_chars: int = MAX_CHARS, total_chars: int | None = None) -> tuple[Message, ...]:
    """Validate a list of dicts (or Messages) into Messages; raise InvalidRequest with a clear reason.

    Sizes are checked first (each message against `max_chars`, the whole list against
    `total_chars`, by default the same), then roles and text, so an oversized request costs no
    more than counting its characters. A conversation the worker slides (workers/slide.py) may be
    longer than the window as a whole: its callers pass MAX_CHARS as the total."""
    if isinstance(raw, (str, bytes, Mapping)) or not isinstance(raw, Iterable):
        kind = "a string" if isinstance(raw, (str, bytes)) else type(raw).__name__
        raise InvalidRequest(f"Messages must be a list of {{role, content}} objects, not {kind}.")
    raw = list(raw)
    check_count(raw)  # before any image is decoded: a hundred images cost no more than counting them
    items: list[tuple[Any, str, tuple[ImageData, ...], Message | None]] = []
    for i, m in enumerate(raw):
        if isinstance(m, Message):  # re-checked: one may have crossed a pipe or been built around checks
            role, content = m.role, m.content
            if m.images and isinstance(m.content, str):
                content = [{"type": "text", "text": m.content}, *({"type": "image", "image": im} for im in m.images)]
        elif isinstance(m, dict) and "role" in m and "content" in m:
            role, content = m["role"], m["content"]
        else:
            raise InvalidRequest(f"Message {i + 1} must be an object with 'role' and 'content'.")
        if not isinstance(role, str) or role not in ROLES:
            raise InvalidRequest(f"Message {i + 1} has unknown role {_short(role)}: use one of {', '.join(ROLES)}.")
        text, images = _parts_of(content, role, i)
        if len(text) > max_chars:
            raise ContextOverflow(f"Message {i + 1} is {len(text):,} characters long; the limit is "
                                  f"{limit_words(max_chars)}. Shorten it or send it in parts.")
        items.append((role, text, images, m if isinstance(m, Message) else None))
    count = sum(len(images) for _, _, images, _ in items)
    if count > MAX_IMAGES:
        raise InvalidRequest(f"The conversation holds {count} images; the limit is {MAX_IMAGES}. Start a new conversation for more.")
    total, total_chars = sum(len(text) for _, text, _, _ in items), max_chars if total_chars is None else total_chars
    if total > total_chars:
        raise ContextOverflow(f"The conversation is {total:,} characters long; the limit is "
                              f"{limit_words(total_chars)}. Start a new conversation or shorten the messages.")
    out: list[Message] = []
    for i, (role, text, images, message) in enumerate(items):
        bad = first_unencodable(text)
        if bad is not None:
            raise InvalidRequest(f"Message {i + 1} ({role}) contains {bad}, which is not valid text; remove it.")
        out.append(message if message is not None and message.images == images else Message(role, text, images))
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
