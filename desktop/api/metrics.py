"""Prometheus metrics of the engine, in the text format (prometheus-client): requests by kind,
origin and outcome, TTFT and queue-wait histograms, cached vs new prompt tokens, decode speed,
API responses, and, read at scrape time, queue depth, worker states, KV bytes and cache hit rate."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from desktop.protocol import Chat, CreateSession, Done, ErrorEvent, Generate, MatchKind, AppendInput
from desktop.protocol.reasons import CacheReason, reason_of

WORKER_STATES = ("loading", "idle", "busy", "duplex_active", "duplex_paused", "error")
KINDS = {Chat: "chat", CreateSession: "session_create", AppendInput: "session_append", Generate: "session_generate"}
TTFT_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
WAIT_BUCKETS = (0.001, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0)
TPS_BUCKETS = (1, 5, 10, 20, 50, 100, 200, 500, 1000)


@dataclass(frozen=True, slots=True)
class WorkerLive:
    id: str
    state: str  # one of WORKER_STATES
    in_flight: int
    kv_bytes: int


@dataclass(frozen=True, slots=True)
class Live:
    """The engine at scrape time (None from the source while no engine runs)."""

    queue_depth: int
    workers: tuple[WorkerLive, ...]


class Metrics:
    """Fed by `observe(entry, terminal event)` (a Gateway observer: every user request of every
    gateway the app builds, so counts survive model reloads) and `http(route, status)`; `live()`
    is read on each scrape. Its own registry: nothing global, tests build as many as they like."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self, live: Callable[[], Live | None] = lambda: None) -> None:
        self.registry = r = CollectorRegistry()
        self.requests = Counter("omnidesk_requests", "Requests that ended, by kind, origin (app or api) and outcome",
                                ["kind", "origin", "outcome"], registry=r)
        self.ttft = Histogram("omnidesk_ttft_seconds", "Time to first token, measured in the worker",
                              ["origin"], buckets=TTFT_BUCKETS, registry=r)
        self.queue_wait = Histogram("omnidesk_queue_wait_seconds", "Time a request waited in the gateway's queue",
                                    ["origin"], buckets=WAIT_BUCKETS, registry=r)
        self.prompt_tokens = Counter("omnidesk_prompt_tokens", "Prompt tokens: taken from the KV cache (cached) "
                                     "or computed (new)", ["source"], registry=r)
        self.generated = Counter("omnidesk_generated_tokens", "Tokens generated", registry=r)
        self.decode = Histogram("omnidesk_decode_tokens_per_second", "Decode speed of each reply",
                                buckets=TPS_BUCKETS, registry=r)
        self.prefills = Counter("omnidesk_prefills", "Prefills by how they found their cache "
                                "(hit, extend, prefix, spc, miss)", ["match"], registry=r)
        self.history = Counter("omnidesk_history_tokens", "History tokens (before each new message): taken "
                               "from the KV cache (reused) or read again (new)", ["source"], registry=r)
        self.reasons = Counter("omnidesk_cache_reasons", "Turns by why the cache held all, part or none of "
                               "their history (protocol/reasons.py)", ["reason"], registry=r)
        self.responses = Counter("omnidesk_api_responses", "HTTP responses of the local API by route and status",
                                 ["route", "status"], registry=r)
        for source in ("cached", "new"):
            self.prompt_tokens.labels(source)
        for kind in MatchKind:
            self.prefills.labels(kind.value)
        for source in ("reused", "new"):
            self.history.labels(source)
        for reason in CacheReason:
            self.reasons.labels(reason.name.lower())
        r.register(_LiveCollector(live, self.history))

    def observe(self, entry: Any, event: Done | ErrorEvent) -> None:
        """One request ended (a gateway Request and its terminal event, as Gateway.observers get them)."""
        kind = KINDS.get(type(entry.cmd), type(entry.cmd).__name__.lower())
        origin = getattr(entry, "origin", "app")
        if isinstance(event, ErrorEvent):
            self.requests.labels(kind, origin, f"error:{event.code}").inc()
            return
        s = event.stats
        cancelled = s.finish_reason == "cancelled"
        self.requests.labels(kind, origin, "cancelled" if cancelled else "completed").inc()
        self.queue_wait.labels(origin).observe(s.queue_ms / 1000.0)
        if cancelled and not s.input_tokens:
            return
        if s.input_tokens:
            self.prompt_tokens.labels("cached").inc(s.cached_tokens)
            self.prompt_tokens.labels("new").inc(s.new_tokens)
            self.prefills.labels(s.kind).inc()
            self.history.labels("reused").inc(s.reused_history)
            self.history.labels("new").inc(s.history_tokens - s.reused_history)
            reason = reason_of(s.miss_reason, s.kind)
            if reason is not None:
                self.reasons.labels(reason.name.lower()).inc()
        if s.ttft_ms > 0:
            self.ttft.labels(origin).observe(s.ttft_ms / 1000.0)
        if s.generated_tokens:
            self.generated.inc(s.generated_tokens)
        if s.tok_s > 0:
            self.decode.observe(s.tok_s)

    def http(self, route: str, status: int) -> None:
        self.responses.labels(route, str(status)).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _LiveCollector:
    """Gauges read at scrape time from the engine of the moment."""

    def __init__(self, live: Callable[[], Live | None], history: Counter) -> None:
        self._live, self._history = live, history

    def collect(self) -> Iterable[GaugeMetricFamily]:
        live = self._live()
        queue = GaugeMetricFamily("omnidesk_queue_depth", "Requests waiting in the gateway's queue")
        states = GaugeMetricFamily("omnidesk_worker_state", "1 for each worker's current state",
                                   labels=["worker", "state"])
        flight = GaugeMetricFamily("omnidesk_worker_in_flight", "Requests running on each worker", labels=["worker"])
        kv = GaugeMetricFamily("omnidesk_worker_kv_bytes", "KV cache bytes held by each worker's slots",
                               labels=["worker"])
        queue.add_metric([], live.queue_depth if live else 0)
        for w in live.workers if live else ():
            for state in WORKER_STATES:
                states.add_metric([w.id, state], 1.0 if w.state == state else 0.0)
            flight.add_metric([w.id], w.in_flight)
            kv.add_metric([w.id], w.kv_bytes)
        hit = GaugeMetricFamily("omnidesk_cache_hit_ratio", "Share of history tokens taken from the KV cache "
                                "(reused history tokens / history tokens)")
        counts = {s.labels["source"]: s.value for m in self._history.collect() for s in m.samples
                  if s.name.endswith("_total")}
        total = sum(counts.values())
        hit.add_metric([], counts.get("reused", 0.0) / total if total else 0.0)
        return [queue, states, flight, kv, hit]


def live_from_snapshot(snapshot: Any) -> Live | None:
    """A Live from the admin monitor's Snapshot (read by attribute: workers with id, state and
    in_flight; slots with worker and kv_bytes; queue rows), so that this package needs no UI."""
    if snapshot is None:
        return None
    kv: dict[str, int] = {}
    for slot in snapshot.slots:
        kv[slot.worker] = kv.get(slot.worker, 0) + (slot.kv_bytes or 0)
    workers = tuple(WorkerLive(w.id, w.state, w.in_flight, kv.get(w.id, 0)) for w in snapshot.workers)
    return Live(len(snapshot.queue), workers)
