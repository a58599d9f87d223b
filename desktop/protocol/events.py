"""Typed events from a worker (or the gateway) about one request, the slot snapshot and token
stats they carry, and the worker's heartbeat."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, StrEnum


class FinishReason(str, Enum):
    """Why a request's generation ended (TokenStats.finish_reason; a remote server's own word
    passes through). LENGTH and WINDOW both cut a reply short, for different reasons."""

    STOP = "stop"  # end of sequence or a stop string
    LENGTH = "length"  # the reply reached the request's max_tokens (the reply length limit)
    WINDOW = "window"  # prompt + reply filled the model's context window
    STOPPED = "stopped"  # the client stopped it while it ran
    CANCELLED = "cancelled"  # cancelled before it ran (or while queued)
    PREFILLED = "prefilled"  # a session's input was read; nothing was to be generated


class MatchKind(StrEnum):
    """How a prefill found its cache: hit (nothing new but the reply prompt), extend (slot held the
    history), prefix (cropped at a divergence), spc (system prompt cache), miss (from scratch), disk (restored from a snapshot on disk).
    A str: it is written, counted and shown as its value ("hit"), as saved files hold it."""

    HIT = "hit"
    EXTEND = "extend"
    PREFIX = "prefix"
    SPC = "spc"
    MISS = "miss"
    DISK = "disk"  # the history came back from a KV snapshot on disk (workers/kv_disk)


@dataclass(frozen=True, slots=True)
class TokenStats:
    """Numbers of one request, measured where they happen."""

    input_tokens: int = 0
    cached_tokens: int = 0
    generated_tokens: int = 0
    kind: MatchKind = MatchKind.MISS  # a value's word ("extend") is taken too
    miss_reason: str = ""  # why, in the words of protocol/reasons.CacheReason ("" where none is known)
    prefill_ms: float = 0.0
    ttft_ms: float = 0.0
    decode_ms: float = 0.0
    queue_ms: float = 0.0
    finish_reason: str = ""
    slot: int = -1
    worker: str = ""  # the worker that served it (the gateway fills it in; "" from the worker itself)
    history_tokens: int = 0  # prompt tokens before the new input: what the cache could have held

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", MatchKind(self.kind))

    @property
    def reused_history(self) -> int:
        """History tokens taken from the cache (the cache hit rate counts these)."""
        return min(self.cached_tokens, self.history_tokens)

    @property
    def new_tokens(self) -> int:
        return self.input_tokens - self.cached_tokens

    @property
    def tok_s(self) -> float:
        return 1000.0 * max(self.generated_tokens - 1, 0) / self.decode_ms if self.decode_ms > 0 else 0.0


@dataclass(frozen=True, slots=True)
class PrefillDone:
    request_id: str
    input_tokens: int
    cached_tokens: int
    kind: MatchKind  # a value's word ("extend") is taken too
    prefill_ms: float
    slot: int
    miss_reason: str = ""
    window_start: int = 0  # the first of the request's messages the model still sees after the system prompt (0: all)
    slid: bool = False  # this turn rebuilt the view from the system prompt: the oldest messages just left it

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", MatchKind(self.kind))


@dataclass(frozen=True, slots=True)
class PrefillProgress:
    """A long prompt is being read: `done` of `total` prompt tokens are in the KV (`cached` of them
    were reused, not computed), after `elapsed_ms` of prefill. Sent after a prefill chunk that
    leaves more to do, at most a few times a second; short prompts send none. The time left is
    worked out from two reports (chat/reply.prefill_left)."""

    request_id: str
    done: int
    total: int
    cached: int = 0
    elapsed_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class ChunkEvent:
    """A piece of streamed text: always whole UTF-8 characters."""

    request_id: str
    text_delta: str
    token_ids: tuple[int, ...] = ()


class SlotState(StrEnum):
    """What a KV slot is doing, in the one vocabulary of the worker, the gateway's mirror and the
    admin page: empty (holds nothing), idle (holds a conversation any request may reuse or evict),
    busy (a request builds or runs in it) or session (a stateful session owns it)."""

    EMPTY = "empty"
    IDLE = "idle"
    BUSY = "busy"
    SESSION = "session"


@dataclass(frozen=True, slots=True)
class SlotInfo:
    """The gateway's mirror of one slot: which conversation prefixes it holds and how recent it is."""

    index: int
    state: SlotState
    hashes: tuple[bytes, ...]
    tokens: int
    last_used: float
    session_id: str | None
    kv_bytes: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", SlotState(self.state))


@dataclass(frozen=True, slots=True)
class Done:
    request_id: str
    text: str = ""
    stats: TokenStats = field(default_factory=TokenStats)
    slots: tuple[SlotInfo, ...] = ()
    token_ids: tuple[int, ...] = ()  # the generated ids (EOS included)


@dataclass(frozen=True, slots=True)
class ErrorEvent:
    request_id: str
    code: str
    message: str
    retryable: bool = False


@dataclass(frozen=True, slots=True)
class Queued:
    request_id: str
    position: int
    eta_s: float


@dataclass(frozen=True, slots=True)
class QueueUpdate:
    request_id: str
    position: int
    eta_s: float


@dataclass(frozen=True, slots=True)
class QueueDone:
    request_id: str
    waited_ms: float


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """A worker loop is alive: sent to its host at least every `Liveness.beat_s` while idle and
    while it works. `work` counts units of progress (scheduler ticks and model layers run), so a
    busy worker whose `work` stands still is not progressing. Never part of a request's stream."""

    work: int
    running: int
    resets: int = 0  # Reset commands handled so far


Event = PrefillDone | PrefillProgress | ChunkEvent | Done | ErrorEvent | Queued | QueueUpdate | QueueDone
TERMINAL = (Done, ErrorEvent)
