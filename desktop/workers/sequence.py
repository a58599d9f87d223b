"""One request inside a worker (a sequence) and one stateful session. A sequence stores what
happened to it (its placement, ids in the KV, generated ids, times) and derives the rest.
Written by the scheduler (placement, KV counts, queues) and the loop (tokens, times) only."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from desktop.model.chat_template import Encoded
from desktop.model.messages import Message
from desktop.model.params import SamplingParams
from desktop.protocol import Chat
from desktop.workers.slots import Slot


class Phase(str, Enum):
    WAITING = "waiting"  # queued, no slot yet
    PREFILL = "prefill"  # placed in a slot, its prompt going into the KV
    DECODE = "decode"  # generating, one token a step


@dataclass(frozen=True, slots=True)
class Mark:
    """A point in a session: how many of its messages, and of its ids (slot.ids + pending), lie
    before it."""

    messages: int
    ids: int


@dataclass(eq=False)
class Session:
    """A stateful conversation pinned to one slot; its ids only ever grow (append-only), except
    where a cut reply is truncated or a draft is replaced."""

    session_id: str
    slot: Slot
    history: list[Message] = field(default_factory=list)
    pending: list[int] = field(default_factory=list)  # ids that belong after slot.ids but are not in the KV yet
    busy: str | None = None  # request id running in this session
    reply_at: int | None = None  # where the last message, a generated reply, starts in slot.ids + pending
    draft: Mark | None = None  # where the draft (provisional messages the next input replaces) starts
    window_start: int = 0  # the first message of history its KV holds after the system prompt (0: all; slide.py)


@dataclass(frozen=True, slots=True)
class Placement:
    """The scheduler's admission decision: where the request runs and what it reuses.

    The slot's KV holds prompt[:cached] when prefill starts (reported as cached; a system prompt
    to be saved from this request's own prefill reports 0). `canon`/`bounds` are the canonical
    ids of the messages and the id count after each (the slot's bookkeeping after the reply)."""

    slot: Slot
    prompt: list[int]  # ids that must be in the KV before sampling
    cached: int
    kind: str
    generate: bool
    miss_reason: str = ""
    canon: list[int] = field(default_factory=list)
    bounds: list[int] | None = None
    spc_ids: list[int] | None = None
    spc_after: bool = False  # a long system prompt: saved from this request's own prefill
    history: int = 0  # prompt ids before the new input (the cache hit rate's denominator)
    restore: Any = None  # a runner export of the first `cached` ids, read from disk (kv_disk)


@dataclass(eq=False)
class Seq:
    """One request from arrival to its terminal event."""

    request_id: str
    command: Any
    t_arrival: float
    window: int  # the model's context window (tokens)
    params: SamplingParams | None = None
    msgs: tuple[Message, ...] = ()
    encoded: Encoded | None = None  # the msgs' canonical ids, if the tokenizer stage made them (until admission)
    window_start: int = 0  # a chat past the window: its first message the model still sees after the system prompt (slide.py)
    slid: bool = False  # a session's view was rebuilt for this request (its oldest messages left it)
    view_at: Mark | None = None  # after that rebuild: where the request's messages start in the session's new ids
    session: Session | None = None
    placement: Placement | None = None  # set once, at admission
    num_kv: int = 0  # ids of prompt + generated in the slot's KV
    generated: list[int] = field(default_factory=list)
    stop_requested: bool = False
    sampler: Any = None  # the runner's, made when the first token is sampled
    decoder: Any = None  # StreamDecoder of the reply
    t_admitted: float = 0.0
    t_prefilled: float = 0.0
    t_progress: float = 0.0  # when the last PrefillProgress was sent
    t_first: float = 0.0
    t_last: float = 0.0

    # ------------------------------------------------------------------ derived

    @property
    def phase(self) -> Phase:
        if self.placement is None:
            return Phase.WAITING
        return Phase.DECODE if self.generated else Phase.PREFILL

    @property
    def warm(self) -> bool:
        """A prefill-only chat (max_tokens 0): it warms the cache for a draft the user is still
        typing, so it has the lowest priority (scheduler.py) and yields to any real request."""
        return isinstance(self.command, Chat) and self.params is not None and self.params.max_tokens == 0

    @property
    def slot(self) -> Slot | None:
        return None if self.placement is None else self.placement.slot

    @property
    def prompt(self) -> list[int]:
        return [] if self.placement is None else self.placement.prompt

    @property
    def generate(self) -> bool:
        return self.placement is not None and self.placement.generate

    @property
    def cached(self) -> int:
        return 0 if self.placement is None else self.placement.cached

    @property
    def num_prompt(self) -> int:
        return len(self.prompt)

    @property
    def to_prefill(self) -> int:
        """Prompt ids not in the KV yet."""
        return max(self.num_prompt - self.num_kv, 0)

    @property
    def max_new(self) -> int:
        """Tokens it may generate: its max_tokens, cut where the context window ends."""
        if not self.generate or self.params is None:
            return 0
        return min(self.params.max_tokens, self.window - self.num_prompt)

    @property
    def media(self) -> dict[int, Any]:
        """The request's images by key (model/images.py), for the runner to encode them."""
        return {image.key: image for m in self.msgs for image in m.images}

    @property
    def ids(self) -> list[int]:
        """Prompt then generated ids: what the KV holds a prefix of."""
        return self.prompt + self.generated

    @property
    def kv_ids(self) -> list[int]:
        return self.ids[: self.num_kv]

    @property
    def prefill_ms(self) -> float:
        return 1000.0 * (self.t_prefilled - self.t_admitted) if self.t_prefilled else 0.0

    @property
    def ttft_ms(self) -> float:
        return 1000.0 * (self.t_first - self.t_arrival) if self.t_first else 0.0

    @property
    def decode_ms(self) -> float:
        return 1000.0 * (self.t_last - self.t_first) if len(self.generated) > 1 else 0.0
