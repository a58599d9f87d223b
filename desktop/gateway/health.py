"""The gateway's view of liveness: whether any worker can serve at all (and the error to give at
once when none can: every model failed to load, or the only worker hung), and the door checks of
ids and system prompts that keep raw TypeErrors out of the gateway's API."""

from __future__ import annotations

from typing import Any, Iterable

from desktop.gateway.mirror import WorkerMirror
from desktop.errors import REMOTE_UNREACHABLE as UNREACHABLE
from desktop.errors import ContextOverflow, InvalidRequest, ModelLoadError, OmnideskError, WorkerCrashed
from desktop.model.messages import first_unencodable, limit_words



def no_service(workers: Iterable[WorkerMirror]) -> OmnideskError | None:
    """None while some worker is up, loading or coming back; else why nothing can serve: no model
    (ModelLoadError, not retryable) when every worker either failed to load its model or is a
    remote server that does not answer, else WorkerCrashed."""
    workers = list(workers)
    if any(w.can_serve for w in workers):
        return None
    if not workers:  # every worker was removed
        return WorkerCrashed("No worker is left to serve requests: every one was removed.")
    failed = [w for w in workers if w.code == ModelLoadError.code]
    away = [w for w in workers if w.code == UNREACHABLE]
    if failed and len(failed) + len(away) == len(workers):  # no model here; the servers do not answer
        reasons = list(dict.fromkeys(w.message for w in failed if w.message))
        text = f"No model is loaded: {' '.join(reasons) or 'the model could not be loaded.'}"
        if away:
            many = len(away) > 1
            names = ", ".join(w.worker_id for w in away)
            text += f" The remote worker{'s' if many else ''} {names} do{'' if many else 'es'} not answer either."
        return ModelLoadError(text)
    parts = [f"worker {w.worker_id} stopped" + (f" ({w.message.rstrip('.')})" if w.message else "") for w in workers]
    return WorkerCrashed(f"No worker can serve now: {'; '.join(parts)}.")  # as create_session raises it


def check_request_id(value: Any) -> str:
    """A caller-chosen request id must be a non-empty string."""
    if not isinstance(value, str) or not value:
        raise InvalidRequest(f"A request id must be a non-empty string (got {type(value).__name__}).")
    return value


def check_system(system: Any, max_chars: int) -> str | None:
    """A session's system prompt: None, or text that passes the same checks as a message."""
    if system is None:
        return None
    if not isinstance(system, str):
        raise InvalidRequest(f"The system prompt must be text (got {type(system).__name__}).")
    if len(system) > max_chars:
        raise ContextOverflow(f"The system prompt is {len(system):,} characters long; the limit is {limit_words(max_chars)}.")
    bad = first_unencodable(system)
    if bad is not None:
        raise InvalidRequest(f"The system prompt contains {bad}, which is not valid text; remove it.")
    return system
