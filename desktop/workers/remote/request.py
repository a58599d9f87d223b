"""One remote request in flight (its task, slot, budget and text so far) and the TokenStats its
Done carries: the server's numbers where they can be true, else what this side counted."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from desktop.protocol import MatchKind, TokenStats
from desktop.protocol.reasons import CacheReason
from desktop.workers.remote.outcome import Accounting, Budget
from desktop.workers.remote.reading import Lines


@dataclass(eq=False, slots=True)
class Running:
    """One request in flight: its task, its slot, how much of its reply is taken, the text so far,
    and whether it was stopped."""

    request_id: str
    slot: int
    budget: Budget
    task: asyncio.Task | None = None
    stopped: bool = False
    chunks: list[str] = field(default_factory=list)
    lines: Lines | None = None  # its stream's lines once the answer came (`peak`: the most bytes held at once)

    @property
    def text(self) -> str:
        return "".join(self.chunks)


def ended_stats(run: Running, acc: Accounting, holds: bool, context: int, reason: str) -> TokenStats:
    """The numbers of a request that ended. A prompt longer than the context window (`context`,
    0: unknown) is not believed (0); nor a generated count below the pieces counted here or above
    what was asked for (then the pieces are the count)."""
    prompt = acc.prompt or 0
    if context and prompt > context:
        prompt = 0
    counted = run.budget.pieces
    generated = acc.generated if acc.generated is not None and counted <= acc.generated <= run.budget.tokens else counted
    cached = min(acc.cached or 0, prompt)
    return TokenStats(input_tokens=prompt, cached_tokens=cached, generated_tokens=generated,
                      kind=acc.kind(holds) if cached else MatchKind.MISS.value,
                      miss_reason="" if cached else CacheReason.REMOTE_MISS.value, prefill_ms=acc.prefill_ms,
                      ttft_ms=acc.ttft_ms, decode_ms=acc.decode_ms, finish_reason=reason, slot=run.slot)
