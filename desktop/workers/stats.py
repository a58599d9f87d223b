"""Per-request token stats and per-worker counters (requests, cache hit rate by reused history
tokens, reasons, tokens saved, TTFT); Admin and the terminal chat's /stats show these."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from desktop.protocol import TokenStats
from desktop.protocol.reasons import CacheReason, reason_of
from desktop.workers.sequence import Seq
from desktop.workers.waits import Waits


def finish_stats(seq: Seq, reason: str) -> TokenStats:
    return TokenStats(
        input_tokens=seq.num_prompt,
        cached_tokens=seq.cached,
        generated_tokens=len(seq.generated),
        kind=seq.placement.kind if seq.placement else "miss",
        miss_reason=seq.placement.miss_reason if seq.placement else "",
        prefill_ms=seq.prefill_ms,
        ttft_ms=seq.ttft_ms,
        decode_ms=seq.decode_ms,
        finish_reason=reason,
        slot=seq.slot.index if seq.slot is not None else -1,
        history_tokens=seq.placement.history if seq.placement else 0,
    )


@dataclass
class WorkerCounters:
    """The hit rate counts tokens, not requests: reused history tokens / history tokens (a turn
    that re-reads 5,000 tokens of history is not a hit because its system prompt was cached)."""

    requests: int = 0
    errors: int = 0
    history_tokens: int = 0
    reused_history: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    generated_tokens: int = 0
    reasons: Counter[CacheReason] = field(default_factory=Counter)  # turns by reason
    ttft_ms: Waits = field(default_factory=lambda: Waits(window=512))

    def record(self, stats: TokenStats) -> None:
        self.requests += 1
        self.history_tokens += stats.history_tokens
        self.reused_history += stats.reused_history
        self.input_tokens += stats.input_tokens
        self.cached_tokens += stats.cached_tokens
        self.generated_tokens += stats.generated_tokens
        reason = reason_of(stats.miss_reason, stats.kind)
        if reason is not None:
            self.reasons[reason] += 1
        if stats.ttft_ms:
            self.ttft_ms.add(stats.ttft_ms)

    @property
    def hit_rate(self) -> float:
        return self.reused_history / self.history_tokens if self.history_tokens else 0.0

    def snapshot(self) -> dict:
        return {
            "requests": self.requests,
            "errors": self.errors,
            "cache_hit_rate": self.hit_rate,
            "history_tokens": self.history_tokens,
            "reused_history_tokens": self.reused_history,
            "reasons": {r.value: n for r, n in self.reasons.most_common()},
            "tokens_saved": self.cached_tokens,
            "input_tokens": self.input_tokens,
            "generated_tokens": self.generated_tokens,
            "ttft_p50_ms": self.ttft_ms.percentile(50),
            "ttft_p95_ms": self.ttft_ms.percentile(95),
        }
