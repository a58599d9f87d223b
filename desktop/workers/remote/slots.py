"""The remote host's picture of the server's slots: which conversation each one last ran (as the
chained message hashes the gateway routes by), which session owns it, and when it was used. A chat
is sent to the slot that holds the longest prefix of its messages, so the server's own prefix cache
hits; the snapshot goes back to the gateway in every Done, so routing keeps the conversation here."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from desktop.model.messages import Message, prefix_hashes
from desktop.protocol import SlotInfo, SlotState


@dataclass(slots=True)
class RemoteSlot:
    index: int
    hashes: tuple[bytes, ...] = ()
    tokens: int = 0  # what the server last said this slot's prompt + reply was (0: unknown/empty)
    session_id: str | None = None
    busy: bool = False
    last_used: float = 0.0
    messages: list[Message] = field(default_factory=list)  # a session's conversation so far
    draft_at: int | None = None  # where a session's draft (provisional messages) starts in messages

    def append(self, messages: Sequence[Message], draft: bool = False) -> None:
        """A session's input, in place of its draft (if any); `draft`: provisional, the next input
        replaces it (no messages and `draft`: the draft is withdrawn)."""
        if self.draft_at is not None:
            del self.messages[self.draft_at :]
        at = len(self.messages)
        self.messages.extend(messages)
        self.draft_at = at if draft and messages else None


class RemoteSlots:
    """Slot choice and bookkeeping; one owner thread (the host's loop), no locking."""

    def __init__(self, count: int = 1, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.slots = [RemoteSlot(i) for i in range(max(count, 1))]

    def reset(self, count: int) -> None:
        """The server came (back) up: nothing is known to be cached on it."""
        self.slots = [RemoteSlot(i) for i in range(max(count, 1))]

    def for_chat(self, messages: Sequence[Message]) -> tuple[int, bool] | None:
        """(slot, whether it holds the whole history) for a stateless turn: the free slot holding
        the longest prefix of `messages`, else an empty one, else the least recently used; None
        when every slot is busy or owned by a session."""
        free = [s for s in self.slots if not s.busy and s.session_id is None]
        if not free:
            return None
        chain = prefix_hashes(messages[:-1]) if len(messages) > 1 else []
        best, depth = None, 0
        for slot in free:
            held = set(slot.hashes)
            k = next((k for k in range(len(chain), 0, -1) if chain[k - 1] in held), 0)
            if k > depth or (k == depth and k and best is not None and slot.last_used > best.last_used):
                best, depth = slot, k
        if best is None:
            empty = [s for s in free if not s.hashes and not s.tokens]
            best = empty[0] if empty else min(free, key=lambda s: s.last_used)
        return best.index, bool(chain) and depth == len(chain)

    def for_session(self, session_id: str) -> int | None:
        """A slot for a new session: an empty one, else the least recently used free one."""
        free = [s for s in self.slots if not s.busy and s.session_id is None]
        if not free:
            return None
        empty = [s for s in free if not s.hashes and not s.tokens]
        slot = empty[0] if empty else min(free, key=lambda s: s.last_used)
        slot.session_id, slot.hashes, slot.tokens, slot.messages, slot.draft_at = session_id, (), 0, [], None
        slot.last_used = self._clock()
        return slot.index

    def session(self, session_id: str) -> RemoteSlot | None:
        return next((s for s in self.slots if s.session_id == session_id), None)

    def hold(self, index: int) -> None:
        self.slots[index].busy = True

    def release(self, index: int, messages: Sequence[Message] | None, tokens: int = 0) -> None:
        """The request in this slot ended; `messages` (prompt + reply) is now what its KV holds
        (None: unknown, e.g. it failed: the slot is treated as holding nothing reusable)."""
        slot = self.slots[index]
        slot.busy = False
        slot.last_used = self._clock()
        slot.hashes = tuple(prefix_hashes(messages)) if messages else ()
        slot.tokens = tokens if messages else 0

    def end_session(self, session_id: str) -> bool:
        slot = self.session(session_id)
        if slot is None:
            return False
        slot.session_id, slot.messages, slot.draft_at = None, [], None  # its KV still holds the conversation: keep hashes
        return True

    def snapshot(self) -> tuple[SlotInfo, ...]:
        return tuple(SlotInfo(index=s.index, state=SlotState.BUSY if s.busy else SlotState.SESSION if s.session_id else
                              SlotState.IDLE if s.hashes or s.tokens else SlotState.EMPTY,
                              hashes=s.hashes, tokens=s.tokens, last_used=s.last_used, session_id=s.session_id,
                              kv_bytes=0) for s in self.slots)
