"""The one registry of spoken replies that are over, by request id, and how far: all text given,
all audio made, or silenced. The ReplyVoice, the Voice and the Voice's pipeline mark and ask the
same registry (the Voice owns it), so a reply over for one of them is over for all."""

from __future__ import annotations

import threading
from enum import IntEnum

from desktop.bounded import BoundedDict

KEEP = 4096  # replies remembered (the oldest are long over: late text for them cannot come)


class Over(IntEnum):
    """How far a reply is over; a stronger mark replaces a weaker one, never the reverse."""

    ENDED = 1  # all its text was given (ReplyVoice); its audio may still be made and play
    DONE = 2  # all its audio was made and written (the pipeline)
    SILENCED = 3  # stopped, cancelled or failed: whatever is still queued for it is dropped


class FinishedReplies:
    """Request id → `Over`, the newest `keep`. Thread-safe: the loop, the microphone's thread
    and the voice's threads all mark it."""

    def __init__(self, keep: int = KEEP) -> None:
        if keep < 1:
            raise ValueError(f"keep must be at least 1, not {keep}")
        self.keep = keep
        self._lock = threading.Lock()
        self._over: BoundedDict[str, Over] = BoundedDict(keep)

    def mark(self, request_id: str, how: Over) -> None:
        """The reply is over `how` far (a weaker mark than it has is ignored)."""
        with self._lock:
            if self._over.get(request_id, 0) < how:
                self._over.pop(request_id, None)  # a stronger mark makes it the newest
                self._over[request_id] = how

    def at_least(self, request_id: str, how: Over) -> bool:
        """Whether the reply is over at least `how` far."""
        with self._lock:
            return self._over.get(request_id, 0) >= how

    def __contains__(self, request_id: object) -> bool:
        with self._lock:
            return request_id in self._over

    def __len__(self) -> int:
        with self._lock:
            return len(self._over)
