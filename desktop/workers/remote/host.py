"""Remote host: an OpenAI-compatible server (llama.cpp's server, vLLM, SGLang) as a worker of the
pool. Commands become streamed /v1/chat/completions requests on an asyncio loop of its own thread;
the server's SSE stream becomes ChunkEvents and a Done whose TokenStats carry the server's own
accounting (prompt tokens, cached tokens). Stop closes the stream.

A conversation keeps its slot (slots.py): the Done's slot snapshot holds its message hashes, so the
gateway routes its next turn back here, and here to the same llama.cpp slot (id_slot), where the
server's prefix cache holds it. Sessions keep their messages on this side and send the whole
conversation to their slot each Generate (the server reuses the cached prefix).

Health (health.py): /health is polled (every `health_s` while up; with a growing backoff while
down). A server that stops answering is reported ERROR (code remote_unreachable; not restarting, so
nothing waits for it): what runs there fails with that reason, and it is reported IDLE, empty, once
it answers. One that answers but not as a server we can use (answers.py) is reported ERROR with
code remote_unusable and the reason, and checked on the same way.
A stream that sends nothing for `stall_s` (a server stuck while /health still answers) fails its
request with code remote_stalled and closes the connection, which stops the server's work on it.
Every request ends with one Done or ErrorEvent and frees its slot, whatever the server sends; a
reply is read within its budget (max_tokens, reading.py's byte limits) and no further."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from contextlib import aclosing

import httpx

from desktop.errors import REMOTE_UNREACHABLE as UNREACHABLE
from desktop.model.messages import Message
from desktop.model.params import SamplingParams
from desktop.protocol import (
    AppendInput, Chat, ChunkEvent, Command, CreateSession, Done, EndSession, ErrorEvent, EventSink, Generate,
    PrefillDone, Reset, Shutdown, Stop, TokenStats, TruncateReply, WorkerHost, WorkerState, WorkerStatus,
)
from desktop.workers.remote.health import HealthLoop
from desktop.workers.remote.outcome import REMOTE_ERROR, UNUSABLE, Accounting, Budget, Malformed, Refused, Stalled
from desktop.workers.remote.probe import ServerInfo, why
from desktop.workers.remote.reading import ERROR_BODY_LIMIT, IDENTITY, Lines, TooLong, read_capped
from desktop.workers.remote.reply import read_reply
from desktop.workers.remote.request import Running, ended_stats
from desktop.workers.remote.slots import RemoteSlots
from desktop.workers.remote.spec import RemoteSpec
from desktop.workers.remote.unsupported import unsupported
from desktop.workers.remote.wire import body_error, chat_body

log = logging.getLogger(__name__)


class RemoteHost(WorkerHost):
    """`health_s`: seconds between health checks while up; `backoff`: (first, longest) wait
    between checks while down; `timeout_s`: connect and health-check timeout; `stall_s`: the
    longest a reply's stream may send nothing (before its first line, while the server reads a
    long prompt; then between lines)."""

    def __init__(self, worker_id: str, spec: RemoteSpec, *, health_s: float = 5.0,
                 backoff: tuple[float, float] = (0.5, 30.0), timeout_s: float = 5.0,
                 stall_s: tuple[float, float] = (300.0, 60.0)) -> None:
        self.worker_id, self.spec = worker_id, spec
        self.health_s, self.backoff, self.timeout_s, self.stall_s = health_s, backoff, timeout_s, stall_s
        self.info: ServerInfo | None = None
        self.slots = RemoteSlots()
        self._loop = asyncio.new_event_loop()
        self._thread: threading.Thread | None = None
        self._sink: EventSink | None = None
        self._client: httpx.AsyncClient | None = None
        self._running: dict[str, Running] = {}
        self._health = HealthLoop(spec, health_s, backoff, timeout_s, self._come_up, self._go_down)
        self._closing = False
        self._stop = asyncio.Event()

    # ------------------------------------------------------------------ WorkerHost

    def start(self, sink: EventSink) -> None:
        self._sink = sink
        self._report(WorkerState.LOADING, f"Connecting to {self.spec.url}…")
        self._thread = threading.Thread(target=self._serve, name=f"remote-{self.worker_id}", daemon=True)
        self._thread.start()

    def submit(self, cmd: Command) -> None:
        try:
            self._loop.call_soon_threadsafe(self._handle, cmd)
        except RuntimeError:  # closed: answer here so the request still ends
            rid = getattr(cmd, "request_id", None)
            if rid is not None and self._sink is not None:
                self._emit(ErrorEvent(rid, "shutdown", "The remote worker is closed."))

    def close(self, timeout: float = 5.0) -> None:
        self._closing = True
        if self._thread is None:
            self._loop.close()
            return
        try:
            self._loop.call_soon_threadsafe(self._shutdown)
        except RuntimeError:
            return
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self._loop.close()

    # ------------------------------------------------------------------ reports

    def _report(self, state: WorkerState, message: str = "", code: str = "") -> None:
        info, n = self.info, len(self.slots.slots)
        assert self._sink is not None
        self._sink(self.worker_id, WorkerStatus(
            self.worker_id, state, message, device=f"remote · {self.spec.url}", capacity=n, num_slots=n,
            model=info.name if info and state is WorkerState.IDLE else "",
            context_length=info.context_length if info else 0, code=code))

    def _emit(self, event) -> None:
        assert self._sink is not None
        self._sink(self.worker_id, event)

    # ------------------------------------------------------------------ the loop

    def _serve(self) -> None:
        self._loop.run_until_complete(self._main())
        self._loop.run_until_complete(self._loop.shutdown_asyncgens())

    async def _main(self) -> None:
        timeout = httpx.Timeout(self.timeout_s, read=None)  # a stream may think for long; health checks see a dead server
        async with httpx.AsyncClient(timeout=timeout, trust_env=False) as client:
            self._client = client
            watch = asyncio.ensure_future(self._health.run(client))
            await self._stop.wait()
            watch.cancel()
            tasks = [r.task for r in self._running.values() if r.task]
            self._fail_all("shutdown", "The assistant is shutting down.")
            await asyncio.gather(watch, *tasks, return_exceptions=True)

    def _shutdown(self) -> None:
        self._stop.set()

    def _come_up(self, info: ServerInfo) -> None:
        self.info = info
        self.slots.reset(info.slots)
        log.info("Remote worker %s at %s is up (%s, %d slots)", self.worker_id, self.spec.url, info.name, info.slots)
        self._report(WorkerState.IDLE)

    def _go_down(self, fault: str, reason: str, was_up: bool) -> None:
        """Not used until it serves again: what runs there fails with the reason, and the status
        says it. Unreachable: reported once, on the first failed check (the text stays true while
        the wait between checks grows); unusable (it answers, but not as a server we can use):
        once per reason."""
        every = f"checking again at least every {self.backoff[1]:g} s"
        url = self.spec.url
        if fault == UNUSABLE:
            log.warning("Remote worker %s at %s cannot be used: %s; %s", self.worker_id, url, reason, every)
            self._fail_all(UNUSABLE, f"The remote worker at {url} cannot be used: {reason}.")
            message = f"unusable: {reason} ({url} answers, but not as a server that can serve here); {every}"
        else:
            if was_up:
                log.warning("Remote worker %s at %s went away: %s", self.worker_id, url, reason)
            else:
                log.warning("Remote worker %s at %s does not answer (%s); %s", self.worker_id, url, reason, every)
            self._fail_all(UNREACHABLE, f"The remote worker at {url} stopped answering ({reason}).", retryable=True)
            message = f"unreachable: {url} does not answer ({reason}); {every}"
        self.slots.reset(len(self.slots.slots))
        self._report(WorkerState.ERROR, message, fault)

    def _lost(self) -> None:
        """A request met a dead connection (or a cut reply): check health now."""
        self._health.poke()

    # ------------------------------------------------------------------ commands

    def _handle(self, cmd: Command) -> None:
        if isinstance(cmd, Shutdown):
            self._shutdown()
        elif isinstance(cmd, Reset):
            self._fail_all("worker_reset", "The worker was reset.")
            self.slots.reset(len(self.slots.slots))
        elif isinstance(cmd, Stop):
            run = self._running.get(cmd.request_id)
            if run is None:
                self._emit(ErrorEvent(cmd.request_id, "unknown_request", f"Request {cmd.request_id!r} is not running."))
            elif run.task is not None and not run.stopped:
                run.stopped = True
                run.task.cancel()
        elif self._closing:
            self._emit(ErrorEvent(cmd.request_id, "shutdown", "The assistant is shutting down."))
        elif not self._health.up and self._health.fault == UNUSABLE:
            self._emit(ErrorEvent(cmd.request_id, UNUSABLE, f"The remote worker at {self.spec.url} cannot be used: {self._health.why}."))
        elif not self._health.up:
            self._emit(ErrorEvent(cmd.request_id, UNREACHABLE,
                                  f"The remote worker at {self.spec.url} is not reachable now.", retryable=True))
        elif (refused := unsupported(cmd, self.spec.url)) is not None:
            self._emit(ErrorEvent(cmd.request_id, "invalid_request", refused))
        elif isinstance(cmd, Chat):
            self._chat(cmd)
        else:
            self._session_command(cmd)

    def _chat(self, cmd: Chat) -> None:
        found = self.slots.for_chat(cmd.messages)
        if found is None:
            self._emit(ErrorEvent(cmd.request_id, "busy", "Every slot of the remote worker is in use.", retryable=True))
            return
        self._launch(cmd.request_id, found[0], cmd.messages, cmd.params, found[1])

    def _session_command(self, cmd: Command) -> None:
        rid = cmd.request_id  # type: ignore[union-attr]
        if isinstance(cmd, CreateSession):
            if self.slots.session(cmd.session_id) is not None:
                self._emit(ErrorEvent(rid, "invalid_request", f"Session {cmd.session_id!r} already exists."))
                return
            index = self.slots.for_session(cmd.session_id)
            if index is None:
                self._emit(ErrorEvent(rid, "busy", "Every slot of the remote worker is in use.", retryable=True))
                return
            if cmd.system:
                self.slots.slots[index].messages.append(Message("system", cmd.system))
            self._emit(Done(rid, stats=TokenStats(slot=index, finish_reason="prefilled"), slots=self.slots.snapshot()))
            return
        slot = self.slots.session(cmd.session_id)  # type: ignore[union-attr]
        if slot is None:
            self._emit(ErrorEvent(rid, "unknown_session", f"Session {cmd.session_id!r} is not open on this worker."))  # type: ignore[union-attr]
        elif slot.busy:
            self._emit(ErrorEvent(rid, "busy", "The session is generating; wait for its reply to end.", retryable=True))
        elif isinstance(cmd, AppendInput):  # kept here (a draft too); the server reads it with the next Generate
            slot.append(cmd.messages, cmd.draft)
            self._emit(Done(rid, stats=TokenStats(slot=slot.index, finish_reason="prefilled"), slots=self.slots.snapshot()))
        elif isinstance(cmd, Generate):
            if cmd.messages:  # the user's final words, in place of a draft
                slot.append(cmd.messages)
            slot.draft_at = None  # whatever was drafted is final now
            if all(m.role == "system" for m in slot.messages):
                self._emit(ErrorEvent(rid, "invalid_request", "The session has no messages to reply to yet."))
            else:
                self._launch(rid, slot.index, tuple(slot.messages), cmd.params, True, session=slot.session_id)
        elif isinstance(cmd, TruncateReply):
            if not slot.messages or slot.messages[-1].role != "assistant" or slot.draft_at is not None:
                self._emit(ErrorEvent(rid, "invalid_request", "The session's last message is not a reply."))
                return
            slot.messages.pop()
            if cmd.text:
                slot.messages.append(Message("assistant", cmd.text))
            self._emit(Done(rid, stats=TokenStats(slot=slot.index), slots=self.slots.snapshot()))
        elif isinstance(cmd, EndSession):
            self.slots.end_session(cmd.session_id)
            self._emit(Done(rid, slots=self.slots.snapshot()))

    # ------------------------------------------------------------------ one streamed request

    def _launch(self, rid: str, slot: int, messages: tuple[Message, ...], params: SamplingParams, holds: bool,
                session: str | None = None) -> None:
        if rid in self._running:
            self._emit(ErrorEvent(rid, "invalid_request", f"Request id {rid!r} is already running."))
            return
        run = self._running[rid] = Running(rid, slot, Budget.of(params.max_tokens))
        self.slots.hold(slot)
        run.task = asyncio.ensure_future(self._stream(run, messages, params, holds, session))

    async def _stream(self, run: Running, messages: tuple[Message, ...], params: SamplingParams, holds: bool,
                      session: str | None) -> None:
        """Run one request to its end; whatever the server sends (or a bug here), the request ends
        with a Done or an ErrorEvent and its slot is released."""
        acc = Accounting()
        try:
            await self._exchange(run, messages, params, holds, acc)
        except asyncio.CancelledError:
            return self._end(run, messages, acc, holds, session, "stopped")
        except Refused as exc:
            return self._fail(run, exc.event(run.request_id, self.spec.url))
        except (Stalled, httpx.ReadTimeout) as exc:
            self._lost()  # is it still there at all?
            stalled = exc if isinstance(exc, Stalled) else Stalled(self.stall_s[0], first=not acc.pieces)
            return self._fail(run, stalled.event(run.request_id, self.spec.url))
        except (Malformed, TooLong) as exc:
            self._lost()  # a cut stream may be a server that went away
            log.warning("Remote worker %s: request %s: %s", self.worker_id, run.request_id, exc)
            return self._fail(run, Malformed(str(exc)).event(run.request_id, self.spec.url))
        except (httpx.HTTPError, OSError) as exc:
            self._lost()
            return self._fail(run, ErrorEvent(run.request_id, UNREACHABLE,
                                              f"The remote worker at {self.spec.url} stopped answering ({why(exc)}).", True))
        except Exception as exc:  # a bug here must still end the request
            log.exception("Remote worker %s: request %s failed", self.worker_id, run.request_id)
            return self._fail(run, ErrorEvent(run.request_id, REMOTE_ERROR, f"The remote request failed ({type(exc).__name__}: {exc})."))
        self._end(run, messages, acc, holds, session, acc.finish or "stop")

    async def _exchange(self, run: Running, messages: tuple[Message, ...], params: SamplingParams, holds: bool,
                        acc: Accounting) -> None:
        assert self._client is not None and self.info is not None
        info, t0 = self.info, time.perf_counter()
        body = chat_body(messages, params, info.model, slot=run.slot if info.llamacpp else None)
        waits = httpx.Timeout(self.timeout_s, read=self.stall_s[0])  # the answer's head, then any read
        show = params.max_tokens > 0  # not the one token of a prefill-only turn

        def prefilled() -> None:
            self._emit(PrefillDone(run.request_id, acc.prompt or 0, acc.cached or 0, acc.kind(holds), acc.prefill_ms, run.slot))

        def text(piece: str) -> None:
            if show:
                run.chunks.append(piece)
                self._emit(ChunkEvent(run.request_id, piece))

        async with self._client.stream("POST", self.spec.url + "/v1/chat/completions", json=body,
                                       headers={**self.spec.headers, **IDENTITY}, timeout=waits) as resp:
            if resp.status_code != 200:
                raise Refused(resp.status_code, body_error(await read_capped(resp, ERROR_BODY_LIMIT, cut=True)))
            run.lines = Lines(resp)
            async with aclosing(run.lines.each()) as lines:  # closed here, never by a late GC
                await read_reply(lines, acc, run.budget, self.stall_s, t0, prefilled, text)

    def _end(self, run: Running, messages: tuple[Message, ...], acc: Accounting, holds: bool,
             session: str | None, reason: str) -> None:
        try:
            self._finish(run, messages, acc, holds, session, reason)
        except Exception as exc:  # a bug here must still end the request and free its slot
            log.exception("Remote worker %s: request %s could not end", self.worker_id, run.request_id)
            self._fail(run, ErrorEvent(run.request_id, REMOTE_ERROR, f"The remote request failed ({type(exc).__name__}: {exc})."))

    def _finish(self, run: Running, messages: tuple[Message, ...], acc: Accounting, holds: bool,
                session: str | None, reason: str) -> None:
        if run.request_id not in self._running:  # already failed (host down, closing)
            return
        text = run.text
        held = messages + ((Message("assistant", text),) if text else ())
        slot = self.slots.slots[run.slot]
        done = ended_stats(run, acc, holds, self.info.context_length if self.info is not None else 0, reason)
        self.slots.release(run.slot, held, done.input_tokens + done.generated_tokens)
        if session is not None and slot.session_id == session and text:
            slot.messages.append(Message("assistant", text))
        del self._running[run.request_id]
        self._emit(Done(run.request_id, text, done, self.slots.snapshot()))

    def _fail(self, run: Running, event: ErrorEvent) -> None:
        if self._running.pop(run.request_id, None) is not None:
            self.slots.release(run.slot, None)
            self._emit(event)

    def _fail_all(self, code: str, message: str, retryable: bool = False) -> None:
        """End every request in flight with this error now (before any status that follows) and
        cancel its stream; the cancelled task then finds it ended and sends nothing more."""
        for run in list(self._running.values()):
            self._fail(run, ErrorEvent(run.request_id, code, message, retryable))
            if run.task is not None:
                run.task.cancel()
