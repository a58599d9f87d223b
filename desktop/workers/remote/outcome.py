"""What a remote request's stream adds up to, without I/O: the server's accounting folded piece by
piece (prompt, cached and generated tokens, prefill/decode times, the finish reason), and an HTTP
refusal turned into the error event the user sees."""

from __future__ import annotations

from dataclasses import dataclass

from desktop.protocol import ErrorEvent, MatchKind
from desktop.workers.remote.wire import Piece

REMOTE_ERROR = "remote_error"
STALLED = "remote_stalled"
UNUSABLE = "remote_unusable"  # a worker's status code while its server answers, but not as one we can use
MAX_REPLY_CHARS = 4 << 20  # one reply's text, whatever max_tokens says
CHARS_PER_TOKEN = 64  # above any real token's length: a reply of n tokens is at most 64·n characters


class Refused(Exception):
    """The server answered with an HTTP error (or an error event in the stream)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status, self.detail = status, detail

    def event(self, rid: str, url: str) -> ErrorEvent:
        said = f": {self.detail}" if self.detail else ""
        if self.status in (401, 403):
            return ErrorEvent(rid, REMOTE_ERROR, f"The server at {url} refused the API key (HTTP {self.status}); check it in Settings.")
        if 400 <= self.status < 500:
            code = "context_length_exceeded" if "context" in self.detail.lower() else "invalid_request"
            return ErrorEvent(rid, code, f"The server at {url} refused the request (HTTP {self.status}){said}.")
        return ErrorEvent(rid, REMOTE_ERROR, f"The server at {url} failed (HTTP {self.status}){said}.", retryable=True)


class Stalled(Exception):
    """The server's stream sent nothing for `seconds` (it is stuck, or its connection is)."""

    def __init__(self, seconds: float, first: bool) -> None:
        super().__init__(f"nothing for {seconds:g} s")
        self.seconds, self.first = seconds, first

    def event(self, rid: str, url: str) -> ErrorEvent:
        what = "began no reply" if self.first else "sent nothing more"
        return ErrorEvent(rid, STALLED, f"The server at {url} {what} for {self.seconds:g} s, so the request was "
                                        "ended; it may be stuck or overloaded.", retryable=True)


class Malformed(Exception):
    """The server's reply is not what an OpenAI-compatible server streams; str() says how."""

    def event(self, rid: str, url: str) -> ErrorEvent:
        return ErrorEvent(rid, REMOTE_ERROR, f"The server at {url} sent a reply that cannot be read ({self}), so "
                                             "the request was ended; is it an OpenAI-compatible server?")


@dataclass(slots=True)
class Budget:
    """How much of a reply this side takes, whatever the server sends (it may ignore max_tokens):
    at most `tokens` pieces of text and `chars` characters."""

    tokens: int
    chars: int
    pieces: int = 0
    used: int = 0

    @classmethod
    def of(cls, max_tokens: int) -> Budget:
        tokens = max(max_tokens, 1)  # 0 (prefill only) is sent as 1
        return cls(tokens, min(tokens * CHARS_PER_TOKEN, MAX_REPLY_CHARS))

    @property
    def full(self) -> bool:
        return self.pieces >= self.tokens or self.used >= self.chars

    def take(self, text: str) -> str:
        """The part of `text` that fits (all of it, its beginning, or "" once full)."""
        if self.full:
            return ""
        text = text[:self.chars - self.used]
        self.pieces += 1
        self.used += len(text)
        return text


@dataclass(slots=True)
class Accounting:
    """The server's numbers as they arrive (llama.cpp: with every piece; others: in the last)."""

    prompt: int | None = None
    cached: int | None = None
    generated: int | None = None
    prefill_ms: float = 0.0
    decode_ms: float = 0.0
    ttft_ms: float = 0.0
    finish: str = ""
    pieces: int = 0

    def take(self, piece: Piece, elapsed_s: float) -> None:
        """Fold in a piece (the first one: the prompt has been read)."""
        if not self.pieces:
            self.ttft_ms = elapsed_s * 1000.0
        self.pieces += 1
        self.prompt = piece.prompt_tokens if piece.prompt_tokens is not None else self.prompt
        self.cached = piece.cached_tokens if piece.cached_tokens is not None else self.cached
        self.generated = piece.completion_tokens if piece.completion_tokens is not None else self.generated
        self.prefill_ms = piece.prompt_ms if piece.prompt_ms is not None else self.prefill_ms or self.ttft_ms
        self.decode_ms = piece.decode_ms if piece.decode_ms is not None else elapsed_s * 1000.0 - self.ttft_ms
        self.finish = piece.finish_reason or self.finish


    def kind(self, holds: bool) -> str:
        if not self.cached:
            return MatchKind.MISS.value
        return (MatchKind.EXTEND if holds else MatchKind.PREFIX).value
