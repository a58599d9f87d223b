"""Chat messages: validation of what callers send (roles, text that is valid UTF-8, size limits
checked before any tokenizing), and the canonical form used for hashing.

Content is text, or OpenAI-style parts: text parts, and image parts in user messages (see
images.image_part). A message's images come first, then its text (the way chat apps attach them);
whether the model can see them is the chat template's check (chat_template.ChatTemplate).

Tool rounds: an assistant message may carry `tool_calls` (id, name, arguments as JSON text), a
tool message answers one by its `tool_call_id`; the tools offered ride on the first message
(`tools`, their JSON), so they are part of every prefix hash: a slot rendered with other tools is
never matched."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from desktop.errors import ContextOverflow, InvalidRequest
from desktop.model.image_door import check_count
from desktop.model.images import MAX_IMAGES, ImageData, image_part

ROLES = ("system", "user", "assistant", "tool")
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
    tool_calls: tuple[tuple[str, str, str], ...] = ()  # assistant: (id, name, arguments JSON text)
    tool_call_id: str = ""  # tool: the call it answers
    name: str = ""  # tool: the function's name (optional)
    tools: str = ""  # first message: the tools offered, as JSON text ("" for none)

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
        if self.tool_calls and self.role != "assistant":
            raise InvalidRequest(f"Only assistant messages may carry tool_calls (a {self.role} message has some).")
        if self.role == "tool" and not (isinstance(self.tool_call_id, str) and self.tool_call_id):
            raise InvalidRequest("A tool message must name the call it answers in tool_call_id.")
        for field_ in (*(x for call in self.tool_calls for x in call), self.tool_call_id, self.name, self.tools):
            if not isinstance(field_, str):
                raise InvalidRequest(f"The {self.role} message's tool fields must be text (got {type(field_).__name__}).")

    @property
    def extras(self) -> dict[str, Any]:
        """The tool fields that are set (empty for a plain message)."""
        out: dict[str, Any] = {}
        if self.tool_calls:
            out["tool_calls"] = [list(c) for c in self.tool_calls]
        for name in ("tool_call_id", "name", "tools"):
            if getattr(self, name):
                out[name] = getattr(self, name)
        return out

    def canonical(self) -> bytes:
        """Stable bytes for hashing: role, content and the SHA-256 of each image (so a different
        image is a different message), and the tool fields where set."""
        extras = self.extras
        if not self.images and not extras:
            return json.dumps([self.role, self.content], ensure_ascii=False).encode()
        out: list[Any] = [self.role, self.content, [i.sha256.hex() for i in self.images]]
        return json.dumps(out + [extras] if extras else out, ensure_ascii=False).encode()


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
    extras: list[dict[str, Any]] = []
    for i, m in enumerate(raw):
        if isinstance(m, Message):  # re-checked: one may have crossed a pipe or been built around checks
            role, content = m.role, m.content
            if m.images and isinstance(m.content, str):
                content = [{"type": "text", "text": m.content}, *({"type": "image", "image": im} for im in m.images)]
            extras.append(m.extras)
        elif isinstance(m, dict) and "role" in m and "content" in m:
            role, content = m["role"], m["content"]
            extras.append(tool_fields(m, i))
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
        if message is not None and message.images == images:
            out.append(message)
        else:
            out.append(Message(role, text, images, **_fields(extras[i])))
    if not out:
        raise InvalidRequest("The conversation is empty: send at least one message.")
    check_tool_rounds(out)
    return tuple(out)


def tool_fields(m: Mapping[str, Any], i: int) -> dict[str, Any]:
    """The tool fields of a message dict (`tools` only on the first), checked for shape."""
    out: dict[str, Any] = {}
    calls = m.get("tool_calls")
    if calls:
        if not isinstance(calls, (list, tuple)) or not all(isinstance(c, (list, tuple)) and len(c) == 3 for c in calls):
            raise InvalidRequest(f"Message {i + 1}: tool_calls must be a list of (id, name, arguments) triples.")
        out["tool_calls"] = [list(c) for c in calls]
    for name in ("tool_call_id", "name", "tools"):
        if m.get(name):
            out[name] = m[name]
    if "tools" in out and i != 0:
        raise InvalidRequest(f"Message {i + 1}: only the first message carries the tools offered.")
    if m.get("role") != "tool":
        out.pop("name", None)  # OpenAI lets any message carry a participant name: not rendered here
    return out


def _fields(extras: dict[str, Any]) -> dict[str, Any]:
    out = dict(extras)
    if "tool_calls" in out:
        out["tool_calls"] = tuple(tuple(c) for c in out["tool_calls"])
    return out


def check_tool_rounds(messages: Sequence[Message]) -> None:
    """Every tool message answers a call of the assistant turn before it: by its id where that
    turn's calls are given as tool_calls; a turn whose calls are in its text as the model generated
    them (the API renders known calls that way, so the slot's KV still matches) has no ids to check."""
    made: set[str] = set()
    free = False
    for i, m in enumerate(messages):
        if m.role == "assistant":
            made.update(call[0] for call in m.tool_calls)
            free = not m.tool_calls
        if m.role == "tool" and m.tool_call_id not in made and not free:
            raise InvalidRequest(f"Message {i + 1}: tool_call_id {_short(m.tool_call_id)} answers no tool call "
                                 "made by an earlier assistant message.")


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
