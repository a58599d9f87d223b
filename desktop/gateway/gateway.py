"""The engine's front door: stateless cache-routed chat and stateful sessions pinned to a worker,
served by a pool of worker hosts as async event streams (asyncio only, no Qt). Everything a
caller passes is checked here; a cancel ends its stream within a grace whatever the worker does."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import Counter
from typing import Any, Callable, Iterable, Sequence

from desktop.gateway.departures import Departures
from desktop.gateway.health import check_request_id, check_system, no_service
from desktop.gateway.pool import Pool
from desktop.protocol import (
    AppendInput, Chat, CreateSession, Done, ErrorEvent, Generate, TokenStats, TruncateReply, WorkerHost,
    WorkerState,
)
from desktop.gateway.intake import EventIntake, EventObserver, Observer
from desktop.gateway.positions import Positions
from desktop.gateway.sessions import SessionTable
from desktop.gateway.request import Request, Status
from desktop.gateway.stats_records import engine_stats
from desktop.gateway.warms import Warms
from desktop.protocol.engine_stats import EngineStats
from desktop.gateway.streams import RequestStream
from desktop.errors import InvalidRequest, ModelLoadError, OmnideskError, UnknownRequest, WorkerCrashed, WorkerRemoved
from desktop.model.images import NO_IMAGES
from desktop.model.messages import MAX_CHARS, Message, char_limit, history_hash, parse_messages
from desktop.model.params import SamplingParams, as_params

log = logging.getLogger(__name__)


class Gateway:
    """Queue, route and stream requests over worker hosts. Call every method on the loop that ran
    `start()`; hosts may report from any thread (their events hop onto that loop).

    Refusals at the door raise (QueueFullError, UnknownSession, InvalidRequest, ModelLoadError
    when no worker can serve); once admitted, a request ends with exactly one Done or ErrorEvent
    on its stream. `cancel_grace_s`: how long a running request's worker has to answer a cancel
    before the gateway ends the stream itself. `position_every_s`: a waiting request hears that it
    moved up at most this often (its first position at once; 0: at once, every move; see
    positions.py). What its hosts report is handled by its intake (intake.py)."""

    def __init__(self, hosts: Sequence[WorkerHost], *, queue_max: int = 64, cancel_grace_s: float = 0.5,
                 position_every_s: float = 0.5, clock: Callable[[], float] = time.monotonic) -> None:
        self._hosts: dict[str, WorkerHost] = {host.worker_id: host for host in hosts}
        if not hosts or len(self._hosts) != len(hosts):
            raise ValueError(f"The gateway needs one or more hosts with distinct worker ids (got {list(self._hosts)}).")
        self._positions = Positions(position_every_s)
        self._pool = Pool(self._hosts, queue_max=queue_max, on_assign=self._on_assign,
                          on_position=self._positions.on_position, clock=clock)
        self._requests: dict[str, Request] = {}
        self._sessions = SessionTable()
        self._departures = Departures()  # where conversations were cached when their worker left
        self._counts: Counter[str] = Counter()
        self._kinds: Counter[str] = Counter()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self.observers: list[Observer] = []
        """Called on the loop with each user request and its terminal event (stats with the
        queue wait included), e.g. by /metrics; an observer that raises is logged, never fatal."""
        self.event_observers: list[EventObserver] = []
        """Called on the loop with each event of a host in the pool as it arrives (worker id and
        the event, a WorkerStatus included), before the gateway acts on it, e.g. by the admin
        monitor; an observer that raises is logged, never fatal."""
        self._intake = EventIntake(self._hosts, self._requests, self._pool, self._sessions, self._departures,
                                   counts=self._counts, kinds=self._kinds, observers=self.observers,
                                   event_observers=self.event_observers, grace=cancel_grace_s)
        self._warms = Warms(self._pool, self._requests, self._intake)

    # ------------------------------------------------------------------ life

    async def start(self) -> None:
        """Start every host; requests may be sent at once and wait while workers load."""
        if self._loop is not None:
            raise RuntimeError("The gateway is already started.")
        self._loop = asyncio.get_running_loop()
        self._intake.listen(self._loop)
        self._positions.listen(self._loop)
        for host in self._hosts.values():
            self._start_host(host)

    def add_host(self, host: WorkerHost) -> None:
        """Join a worker to the pool. On a started gateway its host starts at once and reports
        LOADING then IDLE as the others did at start; routing passes it by until it is up.
        Raises ValueError when its worker id is in the pool, OmnideskError once closed."""
        if self._closed:
            raise OmnideskError("The assistant is shutting down.", code="shutdown")
        if host.worker_id in self._hosts:
            raise ValueError(f"Worker id {host.worker_id!r} is already in the pool.")
        self._pool.add_worker(host.worker_id)
        self._hosts[host.worker_id] = host
        if self._loop is not None:
            self._start_host(host)

    async def remove_host(self, worker_id: str) -> None:
        """Take a worker out of the pool, then close its host off the loop (a close may block).
        What runs there, and what waits for it (its sessions' commands), ends at once with an
        ErrorEvent "worker_removed" naming it; its sessions are over; other waiting requests stay
        queued for the other workers, or fail as when no worker is up if none can serve now.
        Its host's later events are ignored. Raises ValueError for a worker not in the pool; does
        nothing once the gateway is closing (close() ends every host itself)."""
        if self._closed:
            return
        host = self._hosts.pop(worker_id, None)
        if host is None:
            raise ValueError(f"There is no worker {worker_id!r} in the pool.")
        self._departures.record(worker_id, "removed", self._pool.workers[worker_id].slots)
        failed = self._pool.remove_worker(worker_id)  # what ran there, what waited pinned to it
        self._intake.worker_gone(worker_id, failed, f"Worker {worker_id} was removed", WorkerRemoved.code)
        self._intake.workers_changed()
        try:
            await asyncio.get_running_loop().run_in_executor(None, host.close)
        except Exception:  # its requests have ended already; a host that closes badly is only logged
            log.exception("Worker %s did not close cleanly", worker_id)

    def _start_host(self, host: WorkerHost) -> None:
        host.start(lambda worker_id, event: self._intake.sink(host, worker_id, event))

    async def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until no worker is still loading; True when at least one is up."""
        async def settled() -> None:
            while any(w.state is WorkerState.LOADING for w in self._pool.workers.values()):
                await self._intake.until_changed()
        await asyncio.wait_for(settled(), timeout)
        return any(w.up for w in self._pool.workers.values())

    async def close(self) -> None:
        """Fail what is queued or running (code "shutdown") and close every host."""
        if self._closed:
            return
        self._closed = True
        self._intake.close()
        self._positions.close()
        self._pool.drain()
        for rid in list(self._requests):
            self._intake.fail(rid, "shutdown", "The assistant is shutting down.", release=False)
        if self._loop is not None:
            loop = asyncio.get_running_loop()
            await asyncio.gather(*(loop.run_in_executor(None, h.close) for h in self._hosts.values()),
                                 return_exceptions=True)

    # ------------------------------------------------------------------ requests

    def chat(self, messages: Iterable[Any], params: SamplingParams | dict | None = None, *,
             request_id: str | None = None, origin: str = "app", conversation: str = "",
             raw: bool = False, overflow: str = "slide") -> RequestStream:
        """A stateless turn over the whole conversation, routed to the worker that caches it.
        `params`: SamplingParams, a dict of its fields, or None for the defaults. `origin` names
        the sender in stats() and for the observers ("app", "api"); `conversation` the saved
        conversation it belongs to (its KV is tagged with it). With max_tokens 0 it is a
        warm (the draft being typed, prefilled): it holds no capacity and waits in no queue, a
        newer one of the same conversation stops it, and it may end at once, "cancelled"
        (warms.py); the stream says how much of the draft is now cached. `raw`: a completion's
        prompt, one message tokenised as is (protocol Chat.raw). `overflow`: "slide" (past the
        window the oldest messages leave the model's view, workers/slide.py) or "error"."""
        if overflow not in ("slide", "error"):
            raise InvalidRequest('overflow must be "slide" or "error".')
        sliding = overflow == "slide" and not raw
        msgs = parse_messages(messages, self._max_chars(), MAX_CHARS if sliding else None)
        known = [w for w in self._pool.workers.values() if w.context_length]
        if known and not any(w.supports_images for w in known) and any(m.images for m in msgs):
            raise InvalidRequest(NO_IMAGES)  # at the door: no loaded model here can see them
        params = as_params(params)
        rid = self._new_id(request_id)
        cmd = Chat(rid, msgs, params, origin=origin, conversation=conversation, raw=raw, overflow=overflow)
        req = Request(rid, cmd, self._future(), history=history_hash(msgs), origin=origin)
        if params.max_tokens == 0:
            self._warms.send(req)
            return RequestStream(req, self.cancel)
        return self._enqueue(req)

    async def create_session(self, system: str | None = None, *, call: bool = False) -> str:
        """Open a session on one worker (for its whole life) and prefill the system prompt. A
        voice call's session (`call`) goes where it pushes out the fewest cached chats, and its
        worker is then in the duplex state (chats are routed elsewhere when they can be)."""
        system = check_system(system, self._max_chars())
        sid = f"s-{uuid.uuid4().hex[:12]}"
        rid = f"create-{sid}"
        req = Request(rid, CreateSession(rid, sid, system), self._future(), call=call)
        self._enqueue(req)
        try:
            event = await asyncio.shield(req.done)
        except asyncio.CancelledError:  # the caller gave up: never leave a session behind
            if self._pool.is_queued(rid):
                await self.cancel(rid)
            elif rid in self._requests:
                self._requests[rid].status = Status.ABANDONED
            raise
        if isinstance(event, ErrorEvent):
            cls = {WorkerCrashed.code: WorkerCrashed, ModelLoadError.code: ModelLoadError,
                   WorkerRemoved.code: WorkerRemoved}.get(event.code, OmnideskError)
            raise cls(event.message, code=event.code, retryable=event.retryable)
        if call and req.worker_id is not None:
            self._pool.mark_call(req.worker_id, sid, paused=False)
        return sid

    def pause_call(self, session_id: str, paused: bool) -> None:
        """A call was paused or resumed: its worker's duplex state follows (DUPLEX_PAUSED while
        every call on it is paused)."""
        if not self._sessions.is_closed(session_id):
            self._pool.mark_call(self._sessions.worker_of(session_id), session_id, paused)

    def append_input(self, session_id: str, messages: Iterable[Any], draft: bool = False) -> RequestStream:
        """Append messages to a session and prefill them (waits for the session's worker).
        `draft`: they are provisional, and the session's next input replaces them (only what
        differs is prefilled then); a draft with no messages withdraws the draft."""
        worker_id = self._sessions.worker_of(session_id)
        if not isinstance(draft, bool):
            raise InvalidRequest(f"draft must be true or false (got {type(draft).__name__}).")
        msgs = self._session_messages(messages) if draft else parse_messages(messages, self._max_chars())
        rid = self._new_id(None)
        return self._enqueue(Request(rid, AppendInput(rid, session_id, msgs, draft), self._future(), pin=worker_id))

    def generate_stream(self, session_id: str, params: SamplingParams | dict | None = None,
                        messages: Iterable[Any] | None = None) -> RequestStream:
        """Generate the session's reply from what was appended so far; `messages` (the user's
        final words, replacing a draft) go in first, in the same command: no round trip between."""
        worker_id = self._sessions.worker_of(session_id)
        msgs = self._session_messages(messages)
        rid = self._new_id(None)
        cmd = Generate(rid, session_id, as_params(params), msgs)
        return self._enqueue(Request(rid, cmd, self._future(), pin=worker_id))

    def _session_messages(self, messages: Iterable[Any] | None) -> tuple[Message, ...]:
        """Messages checked as append_input checks them, where none is allowed too."""
        if messages is None:
            return ()
        raw = messages if isinstance(messages, (str, bytes, dict)) else list(messages)
        return parse_messages(raw, self._max_chars()) if raw else ()

    async def truncate_reply(self, session_id: str, text: str) -> None:
        """The session's last message, the reply it generated, becomes `text`: what the user heard
        of it before a barge-in ("" drops the reply). Stop the reply and let its stream end first.
        Raises InvalidRequest (busy, nothing to truncate), UnknownSession, or the worker's error."""
        worker_id = self._sessions.worker_of(session_id)
        text = parse_messages([Message("assistant", text)], self._max_chars())[0].content if text else ""
        rid = self._new_id(None)
        req = Request(rid, TruncateReply(rid, session_id, text), self._future(), pin=worker_id)
        last = None
        async for event in self._enqueue(req):
            last = event
        if isinstance(last, ErrorEvent):
            raise OmnideskError(last.message, code=last.code, retryable=last.retryable)

    async def cancel(self, request_id: str) -> None:
        """Queued: removed, ends with Done(finish_reason="cancelled"). Running: Stop goes to its
        worker, whose terminal event ends the stream; if it has not answered within the grace,
        the gateway ends the stream itself (its capacity stays held until the worker answers or
        is declared down). Else UnknownRequest."""
        req = self._requests.get(check_request_id(request_id))
        if req is None or (req.side and not req.warm) or req.status is Status.DETACHED:
            raise UnknownRequest(f"Request {request_id!r} is not queued or running (it may have finished already).")
        if self._pool.cancel(request_id) is not None:
            self._intake.end(req, Done(request_id, stats=TokenStats(finish_reason="cancelled")), release=False)
        elif req.status in (Status.RUNNING, Status.ABANDONED):  # an abandoned create still ends its session
            self._intake.stop(req)

    async def end_session(self, session_id: str) -> None:
        """Close a session: its queued commands are cancelled, a running one is stopped, and its
        worker frees the KV. Later use of the id raises UnknownSession; ending it again, or
        after its worker crashed, does nothing."""
        if self._sessions.is_closed(session_id):
            return
        worker_id = self._sessions.end(session_id)
        for req in [r for r in self._requests.values() if r.session_id == session_id and not r.side]:
            await self.cancel(req.request_id)
        if (mirror := self._pool.workers.get(worker_id)) is not None and mirror.up:
            event = await asyncio.shield(self._intake.send_end(worker_id, session_id).done)
            if isinstance(event, ErrorEvent) and event.code not in (WorkerCrashed.code, WorkerRemoved.code, "shutdown"):
                log.warning("Worker %s could not end session %s: %s", worker_id, session_id, event.message)

    def stats(self) -> EngineStats:
        """Workers (state, in flight, slot mirror, sessions), queue (length, p50/p95 wait, ETA),
        request counts, routing decisions and the cache kinds the workers reported."""
        workers = self._pool.worker_stats()
        sessions = {w["id"]: len(self._sessions.on_worker(w["id"])) for w in workers}
        return engine_stats(workers, sessions, self._pool.queue_stats(), self._counts, len(self._pool.running()),
                            self._pool.routes, self._kinds, len(self._sessions))

    # ------------------------------------------------------------------ internals: admission

    def _future(self) -> asyncio.Future:
        if self._loop is None:
            raise RuntimeError("Call Gateway.start() first.")
        if self._closed:
            raise OmnideskError("The assistant is shutting down.", code="shutdown")
        return self._loop.create_future()

    def _new_id(self, request_id: str | None) -> str:
        if request_id is None:
            return uuid.uuid4().hex
        if check_request_id(request_id) in self._requests:
            raise InvalidRequest(f"Request id {request_id!r} is already in use by a running request.")
        return request_id

    def context_length(self) -> int:
        """The longest context (tokens, prompt and reply together) a worker here has reported; 0
        until one is up."""
        return max((w.context_length for w in self._pool.workers.values()), default=0)

    def _max_chars(self) -> int:
        return char_limit(self.context_length())

    def _enqueue(self, req: Request) -> RequestStream:
        unable = no_service(self._pool.workers.values())
        if unable is not None:  # nothing would ever take it: say why now instead of queueing forever
            raise unable
        self._requests[req.request_id] = req
        try:
            self._pool.submit(req)  # may assign at once: on_assign needs the request registered
        except Exception:
            del self._requests[req.request_id]
            raise
        self._counts["submitted"] += 1
        self._counts[f"origin:{req.origin}"] += 1
        return RequestStream(req, self.cancel)

    # ------------------------------------------------------------------ internals: pool callbacks

    def _on_assign(self, req: Request) -> None:
        self._positions.started(req)
        self._intake.submit(req.worker_id, req.cmd)  # type: ignore[arg-type]
