"""User-facing errors: every failure the user can cause or meet carries a code, a plain message
and whether retrying may help. Layers raise these; the edges turn them into error events."""

from __future__ import annotations

REMOTE_UNREACHABLE = "remote_unreachable"  # a remote worker's status code while its server does not answer


class OmnideskError(Exception):
    """Base of all errors that are shown to the user as a message, never as a traceback."""

    code = "error"
    retryable = False

    def __init__(self, message: str, *, code: str | None = None, retryable: bool | None = None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if retryable is not None:
            self.retryable = retryable


class ModelLoadError(OmnideskError):
    """The model could not be loaded (missing path, not a model, unsupported, corrupt, OOM)."""

    code = "model_load"


class InvalidRequest(OmnideskError):
    """The request itself is wrong (empty, unknown role, bad content, bad parameters)."""

    code = "invalid_request"


class ContextOverflow(InvalidRequest):
    """The conversation does not fit into the model's context window."""

    code = "context_length_exceeded"


class BusyError(OmnideskError):
    """Every KV slot is in use by an active request or session; try again shortly."""

    code = "busy"
    retryable = True


class UnknownSession(InvalidRequest):
    """The session id was never created or has already ended."""

    code = "unknown_session"


class UnknownRequest(InvalidRequest):
    """The request id is not running on this worker."""

    code = "unknown_request"


class QueueFullError(OmnideskError):
    """The gateway queue is full; try again later."""

    code = "queue_full"
    retryable = True


class WorkerCrashed(OmnideskError):
    """The worker serving the request died; the request can be retried."""

    code = "worker_crashed"
    retryable = True


class WorkerRemoved(OmnideskError):
    """The worker serving the request was taken out of the pool (a remote server removed in the
    settings); the request can be retried on the others."""

    code = "worker_removed"
    retryable = True
