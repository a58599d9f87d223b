"""The gateway's side of its worker hosts, on its loop: commands out (one a host refuses fails
its request), and what comes back: a request's stream events and its one terminal event, worker
statuses (down: fail what ran there; nothing can serve: fail what waits), and cancels a stuck
worker never answers (ended here after a grace). A host taken out of the pool is no longer heard.
A chat rebuilt on another worker after the worker that cached it went away says so in its Done's
miss reason (departures.py). Every request ends here, with exactly one terminal event."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from dataclasses import replace
from typing import Callable

from desktop.gateway.departures import Departures, why_down
from desktop.gateway.health import no_service
from desktop.gateway.pool import Pool
from desktop.gateway.sessions import SessionTable
from desktop.protocol import (
    TERMINAL, AppendInput, Chat, ChunkEvent, Command, CreateSession, Done, EndSession, ErrorEvent, Event,
    PrefillDone, Stop, TokenStats,
)
from desktop.gateway.request import Request, Status
from desktop.errors import WorkerCrashed
from desktop.model.messages import Message, prefix_hashes
from desktop.protocol import WorkerHost, WorkerStatus
from desktop.protocol.reasons import CacheReason, reason_of

log = logging.getLogger(__name__)

KEPT = (CacheReason.CACHED, CacheReason.EDITED, CacheReason.NEW)  # turns a move did not make read again


Observer = Callable[[Request, Done | ErrorEvent], None]  # a user request's terminal event
EventObserver = Callable[[str, Event | WorkerStatus], None]  # a host's event as it arrives


class EventIntake:
    """Talks to the gateway's hosts on its loop (`listen`) until `close`: sends their commands,
    hears their events, and ends the gateway's requests.

    Shares with the gateway what both read and write: its hosts by worker id, its live requests
    by id, and its request counters (`counts`, and `kinds` of cache use). `observers` hear each
    user request's terminal event, `event_observers` every event of a host in the pool as it
    arrives; `grace`: how long a stopped request's worker has to answer. Every method but `sink`
    runs on the loop."""

    def __init__(self, hosts: dict[str, WorkerHost], requests: dict[str, Request], pool: Pool,
                 sessions: SessionTable, departures: Departures, *,
                 counts: Counter[str], kinds: Counter[str], observers: list[Observer],
                 event_observers: list[EventObserver], grace: float) -> None:
        self._hosts, self._requests, self._pool = hosts, requests, pool
        self._sessions, self._departures = sessions, departures
        self._counts, self._kinds, self._observers, self._grace = counts, kinds, observers, grace
        self._event_observers = event_observers
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self._changed = asyncio.Event()

    def listen(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def close(self) -> None:
        """Hear no more events (what is still registered is ended by the caller)."""
        self._closed = True

    async def until_changed(self) -> None:
        """Return at the next change of a worker's state (or when one leaves)."""
        await self._changed.wait()

    def submit(self, worker_id: str, cmd: Command) -> None:
        """Send a command to a worker; a host that refuses it fails its request (on the loop,
        never inside the caller: the pool's dispatch pass)."""
        try:
            self._hosts[worker_id].submit(cmd)
        except Exception as exc:  # a broken host: fail the request, never the dispatch pass
            log.exception("Worker %s refused a command", worker_id)
            message = f"Worker {worker_id} could not take the request: {exc}"
            self._loop.call_soon(self.fail, cmd.request_id, "worker_crashed", message)  # type: ignore[union-attr]

    def stop(self, req: Request) -> None:
        """Cancel a running request: Stop goes to its worker, whose terminal event ends it; one not
        answered within the grace is ended here (`_end_unanswered`)."""
        if req.status is Status.RUNNING:  # an abandoned create stays so: its session still ends
            req.status = Status.STOPPING
        self.submit(req.worker_id, Stop(req.request_id))  # type: ignore[arg-type]
        self._loop.call_later(self._grace, self._end_unanswered, req)  # type: ignore[union-attr]

    def sink(self, host: WorkerHost, worker_id: str, event: Event | WorkerStatus) -> None:
        """Called by `host` from any thread: hop onto the gateway's loop."""
        if self._loop is None or self._closed:
            return
        try:
            self._loop.call_soon_threadsafe(self._on_event, host, worker_id, event)
        except RuntimeError:  # the loop is closed: the app is exiting
            pass

    def _on_event(self, host: WorkerHost, worker_id: str, event: Event | WorkerStatus) -> None:
        if self._closed:
            return
        if self._hosts.get(worker_id) is not host:  # a removed host, closing: what it ran has ended here
            log.debug("Ignored %s from %s, which is no longer in the pool", type(event).__name__, worker_id)
            return
        for observe in self._event_observers:
            try:
                observe(worker_id, event)
            except Exception:  # a watcher must never break a worker's event path
                log.exception("A gateway event observer failed on %s", type(event).__name__)
        if isinstance(event, WorkerStatus):
            self._on_status(event)
            return
        req = self._requests.get(getattr(event, "request_id", None))  # type: ignore[arg-type]
        if req is None or req.worker_id != worker_id or req.status is Status.DETACHED:  # late (after a crash, cancel or Stop)
            self._counts["dropped_events"] += 1
            log.debug("Dropped %s from %s for a request not running there", type(event).__name__, worker_id)
            if req is not None and req.status is Status.DETACHED and isinstance(event, TERMINAL):
                self.end(req, event)  # the worker answered the cancel at last: free its capacity
            return
        if isinstance(event, ChunkEvent):
            req.chunks.append(event.text_delta)
        elif isinstance(event, PrefillDone):
            self._pool.started(event.request_id, event.slot, event.input_tokens)
        if isinstance(event, TERMINAL):
            self.end(req, event)
        else:
            req.events.put_nowait(event)

    def _on_status(self, status: WorkerStatus) -> None:
        mirror = self._pool.workers.get(status.worker_id)
        if mirror is None:
            log.warning("Status from unknown worker %s ignored", status.worker_id)
            return
        was_up, held = mirror.up, tuple(mirror.slots)
        failed = self._pool.set_status(status)
        if was_up and not mirror.up:
            self._departures.record(status.worker_id, why_down(status), held)
            why = f"Worker {status.worker_id} stopped ({status.message or status.state.value})"
            self.worker_gone(status.worker_id, failed, why, WorkerCrashed.code)
        self.workers_changed()

    def worker_gone(self, worker_id: str, failed: list[Request], why: str, code: str) -> None:
        """A worker went down or left the pool: its sessions are over, and `failed` (what ran
        there or waited pinned to it, already out of the pool) and its EndSessions end with `code`."""
        self._sessions.drop_worker(worker_id, why, code)
        for req in failed:
            again = "the request can be retried" if req.pin is None else "start a new session"
            self.fail(req.request_id, code, f"{why}; {again}.", retryable=req.pin is None, release=False)
        for req in [r for r in self._requests.values() if r.side and r.worker_id == worker_id]:
            self.fail(req.request_id, code, f"{why}.", release=False)

    def workers_changed(self) -> None:
        """A worker's state changed, or one left: if none can serve now, what waits in the queue
        would wait forever (it fails with why); wake whoever waits for a change (wait_ready)."""
        unable = no_service(self._pool.workers.values())
        if unable is not None:
            for req in self._pool.drop_queued():
                self.fail(req.request_id, unable.code, unable.message, retryable=unable.retryable, release=False)
        self._changed.set()
        self._changed = asyncio.Event()

    def fail(self, request_id: str, code: str, message: str, *, retryable: bool = True, release: bool = True) -> None:
        req = self._requests.get(request_id)
        if req is not None:
            self.end(req, ErrorEvent(request_id, code, message, retryable), release=release)

    def _end_unanswered(self, req: Request) -> None:
        """A cancel its worker has not answered within the grace (stuck or slow): end the stream
        now. The request stays registered, detached, so that the worker's own terminal event (or
        its going down) gives its capacity back; its other late events are dropped."""
        if self._closed or self._requests.get(req.request_id) is not req or isinstance(req.cmd, CreateSession):
            return
        log.warning("Worker %s did not answer a cancel of %s within %.1f s; ended it here",
                    req.worker_id, req.request_id, self._grace)
        done = Done(req.request_id, "".join(req.chunks), TokenStats(finish_reason="cancelled", queue_ms=req.waited_ms))
        req.status = Status.DETACHED
        self._counts["cancelled"] += 1
        req.events.put_nowait(done)
        if not req.done.done():
            req.done.set_result(done)

    def _why_missed(self, req: Request, done: Done) -> str:
        """The Done's miss reason, unless the chat's conversation was cached on a worker that has
        since gone (removed, unreachable, crashed) and this one had to rebuild it: then that move."""
        if not isinstance(req.cmd, Chat) or req.worker_id is None:
            return done.stats.miss_reason
        moved = self._departures.take(req.history, req.worker_id)
        kept = reason_of(done.stats.miss_reason, done.stats.kind) in KEPT
        return moved if moved and not kept else done.stats.miss_reason

    def end(self, req: Request, event: Done | ErrorEvent, *, release: bool = True) -> None:
        """Deliver the one terminal event of a request and give back what it held."""
        self._requests.pop(req.request_id, None)
        ok = isinstance(event, Done)
        snapshot, slot = (event.slots, event.stats.slot) if isinstance(event, Done) else ((), -1)
        if req.status is Status.DETACHED:  # its client already had its terminal event
            if release:
                self._pool.release(req.request_id, snapshot, ok=ok, slot=slot)
            return
        cancelled = isinstance(event, Done) and event.stats.finish_reason == "cancelled"
        if release and not req.side:
            hashes = None
            if isinstance(event, Done) and req.messages and not event.slots:  # no snapshot: it holds the reply too
                hashes = tuple(prefix_hashes(req.messages + (Message("assistant", event.text),)))
            self._pool.release(req.request_id, snapshot, ok=ok, hashes=hashes, slot=slot)
        elif req.warm and req.worker_id is not None:  # it held no capacity, but its slot changed
            self._pool.took_in(req.worker_id, snapshot, slot)
        if isinstance(event, Done):
            event = replace(event, stats=replace(event.stats, queue_ms=event.stats.queue_ms + req.waited_ms,
                                                 worker=req.worker_id or "", miss_reason=self._why_missed(req, event)))
            if isinstance(req.cmd, (Chat, AppendInput, CreateSession)) and not cancelled and not req.warm:
                self._kinds[event.stats.kind] += 1
        if not req.side:  # EndSession is bookkeeping, not a request of the user's
            self._counts["cancelled" if cancelled else "completed" if ok else "failed"] += 1
            for observe in self._observers:
                try:
                    observe(req, event)
                except Exception:  # metrics must never break a request's delivery
                    log.exception("A gateway observer failed")
        req.events.put_nowait(event)
        if not req.done.done():
            req.done.set_result(event)
        if isinstance(req.cmd, CreateSession) and ok and req.worker_id is not None:
            if req.status is Status.ABANDONED:
                self.send_end(req.worker_id, req.cmd.session_id)
            else:
                self._sessions.open(req.cmd.session_id, req.worker_id)
        elif isinstance(req.cmd, EndSession) and req.worker_id in self._pool.workers:
            self._pool.forget_session(req.worker_id, req.cmd.session_id)

    def send_end(self, worker_id: str, session_id: str) -> Request:
        """End a session on its worker: an EndSession sent straight there, holding no capacity."""
        rid = f"end-{session_id}"
        req = Request(rid, EndSession(rid, session_id), self._loop.create_future(),  # type: ignore[union-attr]
                      status=Status.RUNNING, worker_id=worker_id)
        self._requests[rid] = req
        self.submit(worker_id, req.cmd)
        return req
