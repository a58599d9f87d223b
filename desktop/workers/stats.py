"""Per-request token stats and per-worker counters (requests, cache hits, tokens saved, TTFT)."""

from __future__ import annotations

from dataclasses import dataclass, field

from desktop.protocol import MatchKind, TokenStats
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
    )


@dataclass
class WorkerCounters:
    requests: int = 0
    errors: int = 0
    cache_hits: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    generated_tokens: int = 0
    ttft_ms: Waits = field(default_factory=lambda: Waits(window=512))

    def record(self, stats: TokenStats) -> None:
        self.requests += 1
        self.cache_hits += stats.kind != MatchKind.MISS.value
        self.input_tokens += stats.input_tokens
        self.cached_tokens += stats.cached_tokens
        self.generated_tokens += stats.generated_tokens
        if stats.ttft_ms:
            self.ttft_ms.add(stats.ttft_ms)

    def snapshot(self) -> dict:
        return {
            "requests": self.requests,
            "errors": self.errors,
            "cache_hit_rate": self.cache_hits / self.requests if self.requests else 0.0,
            "tokens_saved": self.cached_tokens,
            "input_tokens": self.input_tokens,
            "generated_tokens": self.generated_tokens,
            "ttft_p50_ms": self.ttft_ms.percentile(50),
            "ttft_p95_ms": self.ttft_ms.percentile(95),
        }
