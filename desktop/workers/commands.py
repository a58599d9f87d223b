"""Command intake of the worker loop: validate each command as it arrives, queue requests,
and apply Stop / EndSession / Shutdown at once (between two scheduler steps)."""

from __future__ import annotations

import queue
from typing import TYPE_CHECKING

from desktop.engine.protocol import AppendInput, Chat, Command, CreateSession, Done, EndSession, Shutdown, Stop
from desktop.errors import InvalidRequest, OmnideskError, UnknownSession
from desktop.model.messages import parse_messages
from desktop.workers.sequence import Phase, Seq
from desktop.workers.stats import finish_stats

if TYPE_CHECKING:
    from desktop.workers.worker import Worker


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
        else:
            seq = Seq(cmd.request_id, cmd, getattr(cmd, "params", None), t_arrival)
            try:
                self._validate(seq)
            except OmnideskError as err:
                self._error(seq.request_id, err)
                return
            self.waiting.append(seq)

    def _validate(self: Worker, seq: Seq) -> None:
        cmd = seq.command
        if isinstance(cmd, Chat):
            seq.msgs = parse_messages(cmd.messages)
        elif isinstance(cmd, CreateSession):
            if cmd.session_id in self.sessions:
                raise InvalidRequest(f"Session {cmd.session_id} already exists.")
        else:
            session = self.sessions.get(cmd.session_id)
            if session is None:
                raise UnknownSession(f"Unknown session {cmd.session_id!r}: it was never created or has ended.")
            if session.busy is not None:
                raise InvalidRequest("This session is still busy with another request; stop it first.")
            if isinstance(cmd, AppendInput):
                seq.msgs = parse_messages(cmd.messages)
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
                    self._finish(seq, "cancelled")
        session.slot.clear()
        session.slot.session_id = None
        self.emit(Done(cmd.request_id, "", slots=self.table.infos()))

    def _shutdown(self: Worker) -> None:
        err = OmnideskError("The worker is shutting down.", code="shutdown", retryable=True)
        for seq in [*self.waiting, *self.prefilling, *self.decoding.values()]:
            self._fail(seq, err)
        self.closed = True
