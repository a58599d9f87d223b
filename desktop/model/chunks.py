"""Pieces of chat templating kept apart from the template itself: the token ids of each message's
chunk, kept between turns (a bounded LRU), and control tokens in message text kept as text."""

from __future__ import annotations

import threading
from array import array
from dataclasses import dataclass
from typing import Hashable

from desktop.bounded import BoundedDict
from desktop.errors import InvalidRequest

MEMO_UNITS = 8_000_000  # characters + ids the chunk memo may hold (≈ 40 MB at worst)
VERDICTS = 4096  # conversations whose message-by-message rendering was checked
REPLIES = 4096  # replies whose generated ids are kept by their text (ChatTemplate.encode_reply)


@dataclass(frozen=True, slots=True)
class Chunk:
    """One message as the template renders it after its context (`text`, control tokens of the
    message marked), and its token ids."""

    text: str
    ids: array

    @property
    def units(self) -> int:
        return len(self.text) + len(self.ids)


class ChunkMemo:
    """LRU of chunks by key (the message and the context it was rendered in), bounded by the
    characters and ids it holds, plus yes/no verdicts by conversation hash. Thread-safe: the
    tokenizer stage fills it, the worker loop reads it and seeds it with the generated ids of
    replies (ChatTemplate.encode_reply). A seeded chunk is not replaced by a tokenisation of the
    same text that a thread started before the seed: `put` keeps the chunk already there."""

    def __init__(self, max_units: int = MEMO_UNITS, max_verdicts: int = VERDICTS) -> None:
        self._chunks: BoundedDict[Hashable, Chunk] = BoundedDict(max_size=max_units, size=lambda c: c.units, lru=True)
        self._verdicts: BoundedDict[bytes, bool] = BoundedDict(max_verdicts, lru=True)
        self._replies: BoundedDict[str, array] = BoundedDict(REPLIES, lru=True)
        self._lock = threading.Lock()

    @property
    def max_units(self) -> int:
        return int(self._chunks.max_size or 0)

    @max_units.setter
    def max_units(self, value: int) -> None:
        self._chunks.max_size = value

    def get(self, key: Hashable) -> Chunk | None:
        with self._lock:
            return self._chunks.get(key)

    def put(self, key: Hashable, chunk: Chunk) -> Chunk:
        """Keep `chunk` unless one is kept for `key` already; returns the chunk kept."""
        if chunk.units > self.max_units // 2:
            return chunk  # larger than any request may be: not worth evicting everything else
        with self._lock:
            kept = self._chunks.get(key)
            if kept is None:
                self._chunks[key] = kept = chunk
            return kept

    def seed(self, key: Hashable, chunk: Chunk) -> None:
        """Keep `chunk` for `key` in place of any other (a reply's ids as generated)."""
        if chunk.units > self.max_units // 2:
            return
        with self._lock:
            self._chunks[key] = chunk

    def keep_reply(self, text: str, ids: array) -> None:
        """A reply's chunk ids as generated, by its text: the same reply in another context (the
        view after a slide, a branch) reads as the KV holds it where the template renders it the
        same way there."""
        with self._lock:
            if text not in self._replies:  # the first ids stay (another generation of the same text)
                self._replies[text] = ids

    def reply(self, text: str) -> array | None:
        with self._lock:
            return self._replies.get(text)

    def verdict(self, key: bytes) -> bool | None:
        with self._lock:
            return self._verdicts.get(key)

    def set_verdict(self, key: bytes, value: bool) -> None:
        with self._lock:
            self._verdicts[key] = value

    @property
    def units(self) -> int:
        return int(self._chunks.total)


class ControlTokens:
    """Message text is tokenized as text: a control token in it (`<|im_end|>` pasted by a user)
    becomes plain-text ids, so only the template's own markers are control tokens.

    transformers' `sanitize_control_tokens` machinery does the work: `mark` wraps each control
    token of a string in private markers before rendering, and `encode` tokenizes a rendered text,
    marked tokens as plain text and the rest (the template's own markers) normally."""

    def __init__(self, tokenizer) -> None:
        from transformers.utils.chat_template_utils import _get_control_token_patterns, mark_control_tokens

        self.tokenizer = tokenizer
        template = tokenizer.get_chat_template() if hasattr(tokenizer, "get_chat_template") else tokenizer.chat_template
        self.tokens: tuple[str, ...] = tuple(tokenizer._get_control_tokens(template))
        self._pattern = _get_control_token_patterns(self.tokens)[0]
        self._mark = mark_control_tokens

    def mark(self, text: str) -> str:
        return self._mark(text, self._pattern)

    def encode(self, text: str) -> list[int]:
        if not text:
            return []
        try:
            return list(self.tokenizer(text, add_special_tokens=False, sanitize_control_tokens=True)["input_ids"])
        except ValueError as exc:  # a control token this tokenizer cannot spell with plain text
            raise InvalidRequest(
                f"A message contains text this model cannot read as plain text ({exc}); remove the "
                "model's control markers (like <|im_end|>) from it."
            ) from exc
