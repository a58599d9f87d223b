"""The worker pool: one FIFO queue, one dispatch function, cache-aware routing over the workers'
slot mirrors, and the capacity each request holds from assignment to its terminal event."""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Callable, Iterable

from desktop.gateway.eta import ServiceTimes, Waits
from desktop.gateway.mirror import IN_USE, Duplex, Route, WorkerMirror
from desktop.gateway.request import Request
from desktop.protocol import Chat, CreateSession, SlotInfo
from desktop.errors import QueueFullError
from desktop.protocol import WorkerState, WorkerStatus


class Pool:
    """Queue and dispatch. Synchronous and loop-agnostic: the gateway calls it on its loop.

    `on_assign(req)` is called the moment a request is given a worker (capacity already taken)
    and must submit its command; `on_position(req, first)` when a queued request's position
    changed (first=True: it has just been queued)."""

    def __init__(self, worker_ids: Iterable[str], *, queue_max: int, on_assign: Callable[[Request], None],
                 on_position: Callable[[Request, bool], None], clock: Callable[[], float] = time.monotonic,
                 service: ServiceTimes | None = None) -> None:
        if queue_max < 0:
            raise ValueError(f"queue_max must be ≥ 0 (got {queue_max}).")
        self.workers = {w: WorkerMirror(w) for w in worker_ids}
        self.queue_max = queue_max
        self.service = service or ServiceTimes()
        self.waits = Waits()
        self.routes = {r.value: 0 for r in Route}  # dispatches by routing decision
        self._queue: OrderedDict[str, Request] = OrderedDict()
        self._running: dict[str, Request] = {}
        self._on_assign, self._on_position, self._clock = on_assign, on_position, clock
        self._dispatching = False
        self._again = False

    # ------------------------------------------------------------------ reads

    def __len__(self) -> int:
        return len(self._queue)

    def queued(self) -> list[Request]:
        return list(self._queue.values())

    def running(self, worker_id: str | None = None) -> list[Request]:
        return [e for e in self._running.values() if worker_id is None or e.worker_id == worker_id]

    def is_queued(self, request_id: str) -> bool:
        return request_id in self._queue

    def worker_stats(self) -> list[dict]:
        """Each worker's state, capacity in use and slot mirror, for the admin panel. A slot is
        in use when the worker's last snapshot said so; `running` is what runs in it now, as its
        PrefillDone said (the mirror itself changes only when a request ends), else None."""
        out = []
        for m in self.workers.values():
            runs = self._runs_in_slots(m.worker_id)
            out.append({
                "id": m.worker_id, "state": m.duplex.value if m.up and m.duplex else m.state.value,
                "capacity": m.capacity, "in_flight": len(m.running), "calls": len(m.calls),
                "slots": [{"index": s.index, "in_use": s.state in IN_USE, "session_id": s.session_id,
                           "tokens": s.tokens, "hashes": len(s.hashes), "last_used": m.used_at.get(s.index, 0.0),
                           "running": runs.get(s.index)} for s in m.slots],
            })
        return out

    def _runs_in_slots(self, worker_id: str) -> dict[int, dict]:
        """Slot → the request running in it on this worker: its id, the messages a chat sent (None
        for a session's command), the prompt tokens in the KV and the first 8 hex digits of its
        history hash ('' for none)."""
        return {e.slot: {"request_id": e.request_id,
                         "messages": len(e.cmd.messages) if isinstance(e.cmd, Chat) else None,
                         "tokens": e.prompt_tokens, "history": e.history[:4].hex()}
                for e in self.running(worker_id) if e.slot >= 0}

    def started(self, request_id: str, slot: int, prompt_tokens: int) -> None:
        """A running request's prefill is done: it runs in `slot` with `prompt_tokens` in its KV
        (shown by worker_stats until it ends; routing reads only the mirror)."""
        req = self._running.get(request_id)
        if req is not None:
            req.slot, req.prompt_tokens = slot, prompt_tokens

    def queue_stats(self) -> dict:
        """Queue length, p50/p95 wait, the ETAs given and the service-time average behind them."""
        etas = [e.eta_s for e in self._queue.values()]
        now = self._clock()
        entries = [{"request_id": e.request_id, "position": e.position, "waited_s": max(now - e.arrived, 0.0),
                    "eta_s": e.eta_s, "pin": e.pin, "kind": type(e.cmd).__name__, "origin": e.origin}
                   for e in self._queue.values()]
        return {"length": len(etas), "max": self.queue_max, "entries": entries,
                "wait_ms_p50": self.waits.percentile(50), "wait_ms_p95": self.waits.percentile(95),
                "eta_avg_s": sum(etas) / len(etas) if etas else 0.0, "service_avg_s": self.service.mean_s}

    # ------------------------------------------------------------------ changes

    def submit(self, req: Request) -> None:
        """Queue a request and dispatch; raises QueueFullError (and forgets it) when it would
        have to wait behind `queue_max` others."""
        req.arrived = self._clock()
        self._queue[req.request_id] = req
        self._dispatch()
        if req.request_id in self._queue and len(self._queue) > self.queue_max:
            del self._queue[req.request_id]
            raise QueueFullError(
                f"The request queue is full ({self.queue_max} requests are already waiting); "
                "try again in a moment."
            )
        self._publish_positions()

    def cancel(self, request_id: str) -> Request | None:
        """Remove a queued request (its wait so far kept in waited_ms); None if it is not queued."""
        req = self._queue.pop(request_id, None)
        if req is not None:
            req.position, req.waited_ms = 0, (self._clock() - req.arrived) * 1000.0
            self._dispatch()
            self._publish_positions()
        return req

    def release(self, request_id: str, snapshot: tuple[SlotInfo, ...] = (), *, ok: bool = True,
                hashes: tuple[bytes, ...] | None = None, slot: int = -1) -> Request | None:
        """A running request ended: free its capacity, take in the worker's report (its slot
        snapshot; without one, the `slot` its Done named and the `hashes` it now holds), dispatch."""
        req = self._running.pop(request_id, None)
        if req is None:
            return None
        now = self._clock()
        opened = req.cmd.session_id if ok and isinstance(req.cmd, CreateSession) else None
        self.workers[req.worker_id].release(request_id, snapshot, slot=slot, hashes=hashes if ok else None,  # type: ignore[index]
                                              session_id=opened, now=now)
        if ok:
            self.service.add(now - req.dispatched)
        self._dispatch()
        self._publish_positions()
        return req

    def took_in(self, worker_id: str, snapshot: tuple[SlotInfo, ...], slot: int) -> None:
        """A request that held no capacity here (a warm) ended: take in its slot snapshot."""
        if worker_id in self.workers and snapshot:
            self.workers[worker_id].release("", snapshot, slot=slot, now=self._clock())
            self._dispatch()
            self._publish_positions()

    def set_status(self, status: WorkerStatus) -> list[Request]:
        """Apply a worker's state. Going down (ERROR, or LOADING again) drops what runs on it and
        what waits pinned to it, returned for the gateway to fail; coming up resets its mirror."""
        mirror = self.workers[status.worker_id]
        was_up = mirror.up
        mirror.state, mirror.message, mirror.code = status.state, status.message, status.code
        mirror.restarting = status.state is WorkerState.ERROR and status.restarting
        if status.context_length:  # the status of a loaded model says what it can take
            mirror.context_length, mirror.supports_images = status.context_length, status.supports_images
        failed: list[Request] = []
        if was_up and not mirror.up:
            failed = self._work_of(status.worker_id)
            mirror.reset(len(mirror.slots), mirror.capacity)
        elif mirror.up and not was_up:
            mirror.reset(status.num_slots, status.capacity)
        elif mirror.up:
            mirror.capacity = max(status.capacity, 1)
        self._dispatch()
        self._publish_positions()
        return failed

    def add_worker(self, worker_id: str) -> None:
        """A worker joins the pool, loading (routing passes it by until it reports that it is up)."""
        if worker_id in self.workers:
            raise ValueError(f"Worker {worker_id!r} is already in the pool.")
        self.workers[worker_id] = WorkerMirror(worker_id)

    def remove_worker(self, worker_id: str) -> list[Request]:
        """A worker leaves the pool: its mirror is gone; what runs on it and what waits pinned to
        it are taken out and returned for the gateway to fail; the rest of the queue is dispatched
        to the other workers (and hears its new ETA)."""
        self.workers.pop(worker_id)
        failed = self._work_of(worker_id)
        self._dispatch()
        self._publish_positions()
        return failed

    def _work_of(self, worker_id: str) -> list[Request]:
        """Take out what runs on a worker and what waits pinned to it (it went down or away)."""
        failed = [self._running.pop(e.request_id) for e in self.running(worker_id)]
        return failed + [self._queue.pop(e.request_id) for e in self.queued() if e.pin == worker_id]

    def mark_call(self, worker_id: str, session_id: str, paused: bool) -> None:
        """A voice call's session lives on this worker (live, or paused)."""
        if worker_id in self.workers:  # else it was removed meanwhile (its sessions with it)
            self.workers[worker_id].calls[session_id] = paused

    def forget_session(self, worker_id: str, session_id: str) -> None:
        """A session ended: its slot may serve chats again, which may be waiting for one."""
        self.workers[worker_id].forget_session(session_id)
        self._dispatch()
        self._publish_positions()

    def drop_queued(self) -> list[Request]:
        """Take every queued request out (no worker can ever serve them); returns them."""
        out = list(self._queue.values())
        self._queue.clear()
        return out

    def drain(self) -> list[Request]:
        """Forget everything queued and running (shutdown); returns those requests."""
        out = list(self._queue.values()) + list(self._running.values())
        self._queue.clear()
        for e in self._running.values():
            self.workers[e.worker_id].running.pop(e.request_id, None)  # type: ignore[index]
        self._running.clear()
        return out

    # ------------------------------------------------------------------ dispatch

    def _dispatch(self) -> None:
        """The single dispatch point: walk the queue in arrival order and assign every request
        that can run now. Once an unpinned request cannot be placed, no later unpinned one can
        (they all need free capacity and a usable slot), so FIFO among them holds; a pinned
        request waits only for its own worker and for its session's previous command."""
        if self._dispatching:  # a callback re-entered: run again once the current pass ends
            self._again = True
            return
        self._dispatching = True
        try:
            self._again = True
            while self._again:
                self._again = False
                self._dispatch_pass()
        finally:
            self._dispatching = False

    def _dispatch_pass(self) -> None:
        any_blocked = False
        blocked_workers: set[str] = set()
        busy_sessions = {e.session_id for e in self._running.values() if e.session_id}
        for req in list(self._queue.values()):
            if req.request_id not in self._queue:
                continue
            if req.pin is None:
                if any_blocked:
                    continue
                target = self._route(req)
                if target is None:
                    any_blocked = True
                    continue
            else:
                if req.pin in blocked_workers or req.session_id in busy_sessions:
                    continue
                if self.workers[req.pin].free <= 0:
                    blocked_workers.add(req.pin)
                    continue
                target = (req.pin, Route.SESSION)
            self._assign(req, *target)
            if req.session_id:
                busy_sessions.add(req.session_id)

    def _route(self, req: Request) -> tuple[str, Route] | None:
        """Pick the worker (never the slot: the worker does): cached history → an empty slot →
        evict the least recently used slot → wait. Each worker's slots are read from its mirror
        less those its running requests take (`WorkerMirror._open`). Ties go to the worker with
        the most free capacity (spreads load), then pool order."""
        ups = sorted((w for w in self.workers.values() if w.free > 0), key=lambda w: -w.free)
        if req.call:  # a new call: the worker whose slots hold the fewest chats, without a live call
            ups.sort(key=lambda w: (w.duplex is Duplex.ACTIVE, w.cached_slots, -len(w.empty_slots()), -w.free))
            best = next((w for w in ups if w.empty_slots() or w.lru_slot()), None)
            return (best.worker_id, Route.FREE if best.empty_slots() else Route.EVICT) if best else None
        ups.sort(key=lambda w: w.duplex is Duplex.ACTIVE)  # stable: chats keep away from a live call
        hits = [w for w in ups if w.hit_slot(req.history) is not None]
        if hits:
            return hits[0].worker_id, Route.HIT
        empties = [(w, n) for w in ups if (n := len(w.empty_slots()))]
        if empties:
            return max(empties, key=lambda pair: (pair[0].duplex is not Duplex.ACTIVE, pair[0].free, pair[1]))[0].worker_id, Route.FREE
        oldest = min(((found[1], i, w.worker_id) for i, w in enumerate(ups) if (found := w.lru_slot())), default=None)
        return (oldest[2], Route.EVICT) if oldest else None

    def _assign(self, req: Request, worker_id: str, route: Route) -> None:
        del self._queue[req.request_id]
        now = self._clock()
        claim = None if route is Route.SESSION else req.history if route is Route.HIT else b""
        self.workers[worker_id].take(req.request_id, claim)
        req.worker_id, req.route, req.position = worker_id, route, 0
        req.dispatched, req.waited_ms = now, (now - req.arrived) * 1000.0
        self._running[req.request_id] = req
        self.waits.add(req.waited_ms)
        self.routes[route.value] += 1
        self._on_assign(req)

    def _publish_positions(self) -> None:
        up = [w for w in self.workers.values() if w.up] or list(self.workers.values())
        total = sum(w.capacity for w in up)
        for i, req in enumerate(self._queue.values(), start=1):
            if req.position != i:
                first = req.position == 0
                cap = self.workers[req.pin].capacity if req.pin else total
                req.position, req.eta_s = i, self.service.eta(i, cap)
                self._on_position(req, first)
