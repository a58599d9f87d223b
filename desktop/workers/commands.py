"""Command intake of the worker loop: validate each command as it arrives (sizes before any
tokenizing), queue requests with the scheduler, and apply Stop / EndSession / Shutdown / Reset at
once (between two ticks). Nothing a command carries can raise out of here."""

from __future__ import annotations

import logging
import queue
from typing import Callable

from desktop.errors import InvalidRequest, OmnideskError, UnknownSession
from desktop.model.messages import char_limit, parse_messages
from desktop.model.params import as_params
from desktop.protocol import (
    AppendInput, Chat, Command, CreateSession, Done, EndSession, ErrorEvent, Event, Generate, Reset, Shutdown, Stop,
    TruncateReply,
)
from desktop.workers.scheduler import Scheduler
from desktop.workers.sequence import Phase, Seq
from desktop.workers.stats import finish_stats
from desktop.workers.tokenizer_stage import Prepared, chat_chars, check_raw

log = logging.getLogger(__name__)
REQUESTS = (Chat, CreateSession, AppendInput, Generate)


class CommandIntake:
    """Used on the worker loop's thread, except `put` (the tokenizer stage's forward)."""

    def __init__(self, scheduler: Scheduler, window: int, emit: Callable[[Event], None], clock: Callable[[], float],
                 finish: Callable[[Seq, str], None], fail: Callable[[Seq, OmnideskError], None]) -> None:
        self.sched, self.window, self.emit, self.clock = scheduler, window, emit, clock
        self.finish, self.fail = finish, fail  # the loop's: they emit the terminal event
        self.inbox: queue.SimpleQueue[tuple[Command, float, Prepared | None]] = queue.SimpleQueue()
        self.closed = False
        self.resets = 0  # Reset commands handled (the host gave up on what ran here)

    def put(self, cmd: Command, t_arrival: float, prepared: Prepared | None = None) -> None:
        self.inbox.put((cmd, t_arrival, prepared))

    def empty(self) -> bool:
        return self.inbox.empty()

    def drain(self) -> None:
        while True:
            try:
                item = self.inbox.get_nowait()
            except queue.Empty:
                return
            self.handle(*item)

    def wait(self, timeout: float) -> None:
        """Block up to `timeout` for one command and handle it (the idle loop)."""
        try:
            item = self.inbox.get(timeout=timeout)
        except queue.Empty:
            return
        self.handle(*item)

    def handle(self, cmd: Command, t_arrival: float, prepared: Prepared | None = None) -> None:
        """`prepared`: what the tokenizer stage made of the request (used instead of reading it again)."""
        if isinstance(cmd, Stop):
            self._stop(cmd.request_id)
        elif isinstance(cmd, EndSession):
            self._end_session(cmd)
        elif isinstance(cmd, TruncateReply):
            self._truncate(cmd)
        elif isinstance(cmd, (Shutdown, Reset)):
            self._fail_all(cmd)
        elif isinstance(cmd, REQUESTS) and isinstance(cmd.request_id, str):
            seq = Seq(cmd.request_id, cmd, t_arrival, self.window)
            try:
                self._validate(seq, prepared)
            except Exception as exc:
                if not isinstance(exc, OmnideskError):
                    log.warning("Request %s could not be read", seq.request_id, exc_info=True)
                    exc = InvalidRequest(f"The request could not be read ({type(exc).__name__}: {exc}).")
                if seq.session is not None:
                    seq.session.busy = None
                self._error(seq.request_id, exc)
                return
            self.sched.add(seq)
        else:
            log.error("Ignored a command the worker does not know: %r", type(cmd).__name__)

    def _validate(self, seq: Seq, prepared: Prepared | None) -> None:
        cmd, limit = seq.command, char_limit(self.window)
        if isinstance(cmd, (Chat, Generate)):
            seq.params = as_params(cmd.params)
        if isinstance(cmd, Chat):
            if cmd.overflow not in ("slide", "error"):
                raise InvalidRequest('Chat.overflow must be "slide" or "error".')
            if prepared is None:  # read here (the stage did not); tokenised, and slid, at admission
                prepared = Prepared(parse_messages(cmd.messages, limit, chat_chars(cmd)), None)
            seq.msgs, seq.encoded, seq.window_start = prepared.msgs, prepared.encoded, prepared.start
            if cmd.raw:
                check_raw(seq.msgs)
        elif isinstance(cmd, CreateSession):
            if cmd.session_id in self.sched.sessions:
                raise InvalidRequest(f"Session {cmd.session_id} already exists.")
            if prepared is not None:  # a system prompt, read and tokenised by the stage
                seq.msgs, seq.encoded = prepared.msgs, prepared.encoded
            elif cmd.system is not None:
                system = parse_messages([{"role": "system", "content": cmd.system}], limit)
                seq.msgs = tuple(system) if cmd.system else ()
        else:
            session = self.sched.sessions.get(cmd.session_id)
            if session is None:
                raise UnknownSession(f"Unknown session {cmd.session_id!r}: it was never created or has ended.")
            if session.busy is not None:
                raise InvalidRequest("This session is still busy with another request; stop it first.")
            if not isinstance(getattr(cmd, "draft", False), bool):
                raise InvalidRequest("AppendInput.draft must be true or false.")
            if isinstance(cmd, (AppendInput, Generate)) and (cmd.messages or not _may_be_empty(cmd)):
                seq.msgs = parse_messages(cmd.messages, limit)
            session.busy = seq.request_id
            seq.session = session

    def _stop(self, request_id: str) -> None:
        seq = self.sched.stop(request_id)
        if seq is None:
            self._error(request_id, InvalidRequest(f"Nothing to stop: request {request_id!r} is not running.", code="unknown_request"))
        elif seq.phase is Phase.WAITING:  # left the queue: ended here; an active one ends at its next tick
            self.emit(Done(request_id, "", finish_stats(seq, "cancelled")))

    def _end_session(self, cmd: EndSession) -> None:
        session, seqs = self.sched.end_session(cmd.session_id)
        if session is None:
            self._error(cmd.request_id, UnknownSession(f"Unknown session {cmd.session_id!r}: it was never created or has ended."))
            return
        for seq in seqs:
            if seq.phase is Phase.WAITING:
                self.emit(Done(seq.request_id, "", finish_stats(seq, "cancelled")))
            else:
                self.finish(seq, "cancelled")
        self.sched.close_session(session)
        self.emit(Done(cmd.request_id, "", slots=self.sched.table.infos()))

    def _truncate(self, cmd: TruncateReply) -> None:
        try:
            text = parse_messages([{"role": "assistant", "content": cmd.text}], char_limit(self.window))[0].content if cmd.text else ""
            self.sched.truncate_reply(cmd.session_id, text)
        except OmnideskError as exc:
            self._error(cmd.request_id, exc)
            return
        self.emit(Done(cmd.request_id, "", slots=self.sched.table.infos()))

    def _fail_all(self, cmd: Shutdown | Reset) -> None:
        """Shutdown: fail everything and close. Reset (the host declared this worker hung and has
        failed its requests): drop them, end every session and empty every slot, so that it comes
        back empty if it resumes."""
        if isinstance(cmd, Shutdown):
            err = OmnideskError("The worker is shutting down.", code="shutdown", retryable=True)
        else:
            err = OmnideskError("The worker stopped responding; the request was abandoned.", code="worker_hung", retryable=True)
        for seq in self.sched.every():
            self.fail(seq, err)
        if isinstance(cmd, Shutdown):
            self.closed = True
        else:
            self.sched.reset()
            self.resets += 1

    def _error(self, request_id: str, err: OmnideskError) -> None:
        self.emit(ErrorEvent(request_id, err.code, err.message, err.retryable))


def _may_be_empty(cmd: AppendInput | Generate) -> bool:
    """A Generate brings messages only with the user's final words; a draft with none withdraws it."""
    return isinstance(cmd, Generate) or bool(getattr(cmd, "draft", False))
