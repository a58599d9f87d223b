"""The gateway's numbers as the contract's frozen stats records (`Gateway.stats()`): the pool's
worker and queue reports (plain dicts), the request counters and the cache kinds counted."""

from __future__ import annotations

from typing import Any, Mapping

from desktop.protocol import MatchKind
from desktop.protocol.engine_stats import (
    EngineStats, QueuedStats, QueueStats, RequestCounts, RunningStats, SlotStats, WorkerStats,
)

COUNTS = ("submitted", "completed", "cancelled", "failed", "dropped_events")


def engine_stats(workers: list[dict[str, Any]], sessions: Mapping[str, int], queue: dict[str, Any],
                 counts: Mapping[str, int], running: int, routes: Mapping[str, int],
                 kinds: Mapping[str, int], open_sessions: int) -> EngineStats:
    """`workers`, `queue`: the pool's reports; `sessions`: worker id → sessions open there;
    `counts`: the gateway's counters ("submitted", …, and "origin:<who>" per sender)."""
    origins = {k.removeprefix("origin:"): n for k, n in counts.items() if k.startswith("origin:")}
    return EngineStats(tuple(worker_record(w, sessions.get(w["id"], 0)) for w in workers), queue_record(queue),
                       RequestCounts(**{k: counts.get(k, 0) for k in COUNTS}, running=running), origins,
                       dict(routes), {MatchKind(k): n for k, n in kinds.items()}, open_sessions)


def worker_record(worker: dict[str, Any], sessions: int) -> WorkerStats:
    """One of `Pool.worker_stats()`, with the sessions open on it."""
    slots = tuple(SlotStats(**{**s, "running": RunningStats(**s["running"]) if s.get("running") else None})
                  for s in worker["slots"])
    return WorkerStats(**{**worker, "slots": slots, "sessions": sessions})


def queue_record(queue: dict[str, Any]) -> QueueStats:
    """`Pool.queue_stats()`."""
    return QueueStats(**{**queue, "entries": tuple(QueuedStats(**e) for e in queue["entries"])})
