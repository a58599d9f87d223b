"""Command intake of the worker loop: validate each command as it arrives (sizes before any
tokenizing), queue requests, and apply Stop / EndSession / Shutdown / Reset at once (between two
scheduler steps). Nothing a command carries can raise out of here."""

from __future__ import annotations

import logging
import queue
from typing import TYPE_CHECKING

from desktop.protocol import (
    AppendInput, Chat, Command, CreateSession, Done, EndSession, Generate, Reset, Shutdown, Stop,
)
from desktop.errors import InvalidRequest, OmnideskError, UnknownSession
from desktop.model.messages import char_limit, parse_messages
from desktop.model.params import as_params
from desktop.workers.sequence import Phase, Seq
from desktop.workers.stats import finish_stats

if TYPE_CHECKING:
    from desktop.workers.worker import Worker

log = logging.getLogger(__name__)
REQUESTS = (Chat, CreateSession, AppendInput, Generate)


class CommandIntake:
    """Mixed into Worker; every method runs on the worker's own thread."""

    def _drain(self: Worker) -> None:
        while True:
            try:
                item = self.inbox.get_nowait()
            except queue.Empty:
                return
            self._handle(*item)

    def _handle(self: Worker, cmd: Command, t_arrival: float) -> None:
        if isinstance(cmd, Stop):
            self._stop(cmd.request_id)
        elif isinstance(cmd, EndSession):
            self._end_session(cmd)
        elif isinstance(cmd, Shutdown):
            self._shutdown()
        elif isinstance(cmd, Reset):
            self._reset()
        elif isinstance(cmd, REQUESTS) and isinstance(cmd.request_id, str):
            seq = Seq(cmd.request_id, cmd, None, t_arrival)
            try:
                self._validate(seq)
            except Exception as exc:
                if not isinstance(exc, OmnideskError):
                    log.warning("Request %s could not be read", seq.request_id, exc_info=True)
                    exc = InvalidRequest(f"The request could not be read ({type(exc).__name__}: {exc}).")
                if seq.session is not None:
                    seq.session.busy = None
                self._error(seq.request_id, exc)
                return
            self.waiting.append(seq)
        else:
            log.error("Ignored a command the worker does not know: %r", type(cmd).__name__)

    def _validate(self: Worker, seq: Seq) -> None:
        cmd = seq.command
        limit = char_limit(self.lm.context_length)
        if isinstance(cmd, (Chat, Generate)):
            seq.params = as_params(cmd.params)
        if isinstance(cmd, Chat):
            seq.msgs = parse_messages(cmd.messages, limit)
        elif isinstance(cmd, CreateSession):
            if cmd.session_id in self.sessions:
                raise InvalidRequest(f"Session {cmd.session_id} already exists.")
            if cmd.system is not None:
                parse_messages([{"role": "system", "content": cmd.system}], limit)
        else:
            session = self.sessions.get(cmd.session_id)
            if session is None:
                raise UnknownSession(f"Unknown session {cmd.session_id!r}: it was never created or has ended.")
            if session.busy is not None:
                raise InvalidRequest("This session is still busy with another request; stop it first.")
            if isinstance(cmd, AppendInput):
                seq.msgs = parse_messages(cmd.messages, limit)
            session.busy = seq.request_id
            seq.session = session

    def _stop(self: Worker, request_id: str) -> None:
        for seq in self.waiting:
            if seq.request_id == request_id:
                self.waiting.remove(seq)
                if seq.session is not None:
                    seq.session.busy = None
                self.emit(Done(request_id, "", finish_stats(seq, "cancelled", self.clock())))
                return
        for seq in [*self.prefilling, *self.decoding.values()]:
            if seq.request_id == request_id:
                seq.stop_requested = True
                return
        self._error(request_id, InvalidRequest(f"Nothing to stop: request {request_id!r} is not running.", code="unknown_request"))

    def _end_session(self: Worker, cmd: EndSession) -> None:
        session = self.sessions.pop(cmd.session_id, None)
        if session is None:
            self._error(cmd.request_id, UnknownSession(f"Unknown session {cmd.session_id!r}: it was never created or has ended."))
            return
        for seq in [*self.waiting, *self.prefilling, *self.decoding.values()]:
            if seq.session is session:
                if seq.phase is Phase.WAITING:
                    self.waiting.remove(seq)
                    self.emit(Done(seq.request_id, "", finish_stats(seq, "cancelled", self.clock())))
                else:
                    self._guard(seq, self._finish, seq, "cancelled")
        session.slot.clear()
        session.slot.session_id = None
        self.emit(Done(cmd.request_id, "", slots=self.table.infos()))

    def _shutdown(self: Worker) -> None:
        err = OmnideskError("The worker is shutting down.", code="shutdown", retryable=True)
        for seq in [*self.waiting, *self.prefilling, *self.decoding.values()]:
            self._fail(seq, err)
        self.closed = True

    def _reset(self: Worker) -> None:
        """The host declared this worker hung and has failed its requests: drop them, end every
        session and empty every slot, so that it comes back empty if it resumes."""
        err = OmnideskError("The worker stopped responding; the request was abandoned.", code="worker_hung", retryable=True)
        for seq in [*self.waiting, *self.prefilling, *self.decoding.values()]:
            self._fail(seq, err)
        self.sessions.clear()
        for slot in self.table.slots:
            slot.clear()
            slot.request_id = slot.session_id = None
        self.resets += 1
