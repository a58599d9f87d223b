"""What the engine reports about itself at one moment (`EngineApi.stats()`): its workers and
their slots as routing sees them, the queue, request counts and routing decisions, as frozen
records. `to_json()` gives the plain dict the API and the logs show."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from desktop.protocol.events import MatchKind


@dataclass(frozen=True, slots=True)
class RunningStats:
    """The request running in a slot now, as its PrefillDone said: its id, the messages a chat
    sent (None for a session's command), its prompt tokens in the KV and the first 8 hex digits
    of its history hash ('' for none)."""

    request_id: str
    messages: int | None
    tokens: int
    history: str


@dataclass(frozen=True, slots=True)
class SlotStats:
    """One slot of the gateway's mirror: in use as the worker's last snapshot said, the session
    that owns it, its tokens, how many message-prefix hashes it holds, the gateway's clock at its
    last use (0: never) and what runs in it now."""

    index: int
    in_use: bool
    session_id: str | None
    tokens: int
    hashes: int
    last_used: float
    running: RunningStats | None = None


@dataclass(frozen=True, slots=True)
class WorkerStats:
    """One worker: its state (a WorkerState's value, or "duplex_active"/"duplex_paused" while a
    voice call runs there), capacity, requests in flight, calls and sessions on it, its slots."""

    id: str
    state: str
    capacity: int
    in_flight: int
    calls: int
    slots: tuple[SlotStats, ...]
    sessions: int = 0


@dataclass(frozen=True, slots=True)
class QueuedStats:
    """One waiting request: its place, how long it waited, its ETA, the worker it waits for (a
    session's command; None for any), its command's class name and who sent it."""

    request_id: str
    position: int
    waited_s: float
    eta_s: float
    pin: str | None
    kind: str
    origin: str = "app"


@dataclass(frozen=True, slots=True)
class QueueStats:
    """The queue: its length and bound, the waiting requests in order, p50/p95 wait, the mean of
    the ETAs given and the service-time average behind them."""

    length: int = 0
    max: int = 0
    entries: tuple[QueuedStats, ...] = ()
    wait_ms_p50: float = 0.0
    wait_ms_p95: float = 0.0
    eta_avg_s: float = 0.0
    service_avg_s: float = 0.0


@dataclass(frozen=True, slots=True)
class RequestCounts:
    """User requests since the engine started, and how many run now."""

    submitted: int = 0
    completed: int = 0
    cancelled: int = 0
    failed: int = 0
    dropped_events: int = 0
    running: int = 0


@dataclass(frozen=True, slots=True)
class EngineStats:
    """Everything `stats()` reports. `origins`: requests submitted by who sent them ("app",
    "api"); `routing`: dispatches by routing decision (hit, free, evict, session); `cache`:
    prefills by how they found their cache; `sessions`: sessions open."""

    workers: tuple[WorkerStats, ...] = ()
    queue: QueueStats = QueueStats()
    requests: RequestCounts = RequestCounts()
    origins: Mapping[str, int] = field(default_factory=dict)
    routing: Mapping[str, int] = field(default_factory=dict)
    cache: Mapping[MatchKind, int] = field(default_factory=dict)
    sessions: int = 0

    def to_json(self) -> dict[str, Any]:
        """The plain dict (lists, str keys) as the API and the logs show it."""
        out = asdict(self)
        out["workers"] = [{**w, "slots": list(w["slots"])} for w in out["workers"]]
        out["queue"]["entries"] = list(out["queue"]["entries"])
        for key in ("origins", "routing", "cache"):
            out[key] = {str(k): v for k, v in out[key].items()}
        return out
