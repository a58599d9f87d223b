"""State of one request inside a worker (a sequence) and of one stateful session."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from desktop.model.messages import Message
from desktop.model.params import SamplingParams
from desktop.workers.slots import Slot


class Phase(str, Enum):
    WAITING = "waiting"
    PREFILL = "prefill"
    DECODE = "decode"


@dataclass(eq=False)
class Session:
    """A stateful conversation pinned to one slot; its ids only ever grow (append-only)."""

    session_id: str
    slot: Slot
    history: list[Message] = field(default_factory=list)
    pending: list[int] = field(default_factory=list)  # ids that belong after slot.ids but are not in the KV yet
    busy: str | None = None  # request id running in this session


@dataclass(eq=False)
class Seq:
    """One request from admission to done: the ids to get into the KV, then the generation."""

    request_id: str
    command: Any
    params: SamplingParams
    t_arrival: float
    phase: Phase = Phase.WAITING
    slot: Slot | None = None
    session: Session | None = None
    target: list[int] = field(default_factory=list)  # ids that must be in the KV before sampling
    kv_ids: list[int] = field(default_factory=list)  # ids in the KV so far
    cache: Any = None  # own batch-1 cache while prefilling
    generate: bool = True
    max_new: int = 0
    # stateless bookkeeping for the slot after the reply
    msgs: tuple[Message, ...] = ()
    canon: list[int] = field(default_factory=list)
    bounds: list[int] | None = None
    spc_ids: list[int] | None = None
    spc_after: bool = False  # a long system prompt: kept in the SPC from this request's own prefill
    # generation
    sampler: Any = None
    decoder: Any = None
    generated: list[int] = field(default_factory=list)
    stop_requested: bool = False
    # stats
    kind: str = "miss"
    miss_reason: str = ""
    cached: int = 0
    t_prefill_start: float = 0.0
    t_progress: float = 0.0  # when the last PrefillProgress was sent
    prefill_ms: float = 0.0
    t_first: float = 0.0
    t_last: float = 0.0
