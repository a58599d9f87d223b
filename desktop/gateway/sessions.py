"""Stateful sessions as the gateway sees them: which worker each open session is pinned to, and
why an id is no longer usable (ended, or its worker crashed), for a clear error on late use."""

from __future__ import annotations

from desktop.bounded import BoundedDict
from desktop.errors import UnknownSession, WorkerCrashed


class SessionTable:
    """Open sessions → their worker, plus the last `remember` closed ones with the reason."""

    def __init__(self, remember: int = 1024) -> None:
        self._open: dict[str, str] = {}
        self._gone: BoundedDict[str, tuple[str, str]] = BoundedDict(remember)  # id → (message, code)

    def __len__(self) -> int:
        return len(self._open)

    def open(self, session_id: str, worker_id: str) -> None:
        self._open[session_id] = worker_id

    def worker_of(self, session_id: str) -> str:
        """The session's worker; UnknownSession (saying why) when it is not open."""
        if not isinstance(session_id, str):
            raise UnknownSession(f"A session id is a string from create_session (got {type(session_id).__name__}).")
        worker_id = self._open.get(session_id)
        if worker_id is None:
            message, code = self._gone.get(
                session_id, (f"There is no session {session_id!r}; create one first.", UnknownSession.code))
            raise UnknownSession(message, code=code)
        return worker_id

    def is_closed(self, session_id: str) -> bool:
        """It was open once and has ended (or is too old to remember)."""
        return session_id in self._gone

    def on_worker(self, worker_id: str) -> list[str]:
        return [s for s, w in self._open.items() if w == worker_id]

    def end(self, session_id: str) -> str:
        """Close an open session; returns its worker."""
        worker_id = self.worker_of(session_id)
        self._close(session_id, f"Session {session_id} has ended; create a new one.", UnknownSession.code)
        return worker_id

    def drop_worker(self, worker_id: str, why: str, code: str = WorkerCrashed.code) -> None:
        """The worker went down (or was removed): every session on it is over (its KV is gone);
        a later use of one raises UnknownSession with `why` and `code`."""
        for sid in self.on_worker(worker_id):
            self._close(sid, f"{why}; session {sid} has ended — start a new session.", code)

    def _close(self, session_id: str, message: str, code: str) -> None:
        del self._open[session_id]
        self._gone[session_id] = (message, code)
