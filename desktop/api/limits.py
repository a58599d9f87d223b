"""What one client may cost the local API before it is refused: connections, header and body
sizes, and how long a request may take to arrive; and the open-file limit raised at start."""

from __future__ import annotations

import logging
from dataclasses import dataclass

log = logging.getLogger(__name__)
OPEN_FILES_WANTED = 8192  # the soft limit asked for at start (a desktop's default is often 1,024)


@dataclass(frozen=True, slots=True)
class Limits:
    """`max_connections` are served at once (well below the open-file limit, which the app also
    needs for conversations, recordings and models); when all are taken, a new one takes the place
    of the oldest idle one (no byte of a request yet), else up to `max_waiting` more are answered
    503 with Retry-After, and any beyond are dropped at once. A request's line and headers must arrive
    within `head_timeout_s` of the connection opening (or of the previous response) and hold at
    most `max_head_bytes`; its body within `body_timeout_s` and at most `max_body_bytes`. A
    client that stops reading its response is cut after `write_stall_s` (its request cancelled)."""

    max_connections: int = 64
    max_waiting: int = 64
    max_head_bytes: int = 64 << 10
    max_body_bytes: int = 32 << 20  # an image at the 20 MB limit, base64-encoded, and the conversation
    head_timeout_s: float = 10.0
    body_timeout_s: float = 60.0
    write_stall_s: float = 60.0
    keep_alive_s: int = 5  # an idle connection between requests is closed after this long
    retry_after_s: int = 2

    def __post_init__(self) -> None:
        if min(self.max_connections, self.max_head_bytes, self.max_body_bytes) < 1 or self.max_waiting < 0:
            raise ValueError(f"Invalid API limits: {self}")
        if min(self.head_timeout_s, self.body_timeout_s, self.write_stall_s, self.keep_alive_s, self.retry_after_s) <= 0:
            raise ValueError(f"Invalid API timeouts: {self}")


def raise_open_files(wanted: int = OPEN_FILES_WANTED) -> tuple[int, int] | None:
    """Raise this process's soft limit on open files towards `wanted`, as far as the hard limit
    allows (never lowering it). Returns (soft, hard) after, or None where there is no such limit."""
    try:
        import resource
    except ImportError:  # Windows: no RLIMIT_NOFILE
        return None
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        if soft != resource.RLIM_INFINITY and soft < target:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            log.info("Open-file limit raised from %d to %d (hard limit %s)", soft, target, hard)
        return resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError) as exc:  # a container may refuse: the API's own bound still holds
        log.warning("Could not raise the open-file limit: %s", exc)
        return None
