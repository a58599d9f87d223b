"""One request as the gateway tracks it, from admission to its one terminal event: what it asks,
where it waits and runs (the pool writes those fields), what its client hears, and its status."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from enum import Enum

from desktop.gateway.mirror import Route
from desktop.model.messages import Message
from desktop.protocol import Chat, Command, EndSession


class Status(Enum):
    NEW = "new"  # admitted; not told Queued (a request placed at once never is)
    QUEUED = "queued"  # told Queued, so it will be told QueueDone when it starts
    RUNNING = "running"  # its command went to its worker
    STOPPING = "stopping"  # cancelled while running: Stop went to its worker, whose answer ends it
    ABANDONED = "abandoned"  # a create_session whose caller left: end the session once it opens
    DETACHED = "detached"  # its stream was ended here (an unanswered cancel); its capacity is still held


@dataclass(eq=False, slots=True)
class Request:
    """`done` is resolved with the terminal event; `events` is what the client reads, that event
    last. `pin` names the worker a session command must run on (None: any worker)."""

    request_id: str
    cmd: Command
    done: asyncio.Future
    pin: str | None = None
    history: bytes = b""  # history_hash(messages) of a chat
    call: bool = False  # a voice call's CreateSession: placed where it costs chats no cache
    origin: str = "app"  # who sent it: "app" (the window, calls) or "api" (the local HTTP API)
    warm: bool = False  # a prefill-only chat (a draft being typed): holds no capacity (warms.py)
    status: Status = Status.NEW
    # the pool's, while it waits and runs
    arrived: float = 0.0
    position: int = 0  # 1-based while queued, 0 otherwise
    eta_s: float = 0.0
    worker_id: str | None = None  # set on assignment
    route: Route | None = None  # why it went there (the worker picks the slot itself)
    dispatched: float = 0.0
    waited_ms: float = 0.0
    slot: int = -1  # the slot its worker said it runs in (PrefillDone), -1 until then
    prompt_tokens: int = 0  # the prompt's tokens now in that slot's KV (PrefillDone)
    # the client's
    events: asyncio.Queue = field(default_factory=asyncio.Queue)
    chunks: list[str] = field(default_factory=list)  # text streamed so far (for a Done made by the gateway)

    @property
    def session_id(self) -> str | None:
        return getattr(self.cmd, "session_id", None)

    @property
    def messages(self) -> tuple[Message, ...]:
        """A chat's conversation (to mirror its slot when its Done brings no snapshot), else ()."""
        return self.cmd.messages if isinstance(self.cmd, Chat) else ()

    @property
    def side(self) -> bool:
        """Sent straight to its worker, holding no capacity, no request of the user's: an
        EndSession (bookkeeping) or a warm."""
        return self.warm or isinstance(self.cmd, EndSession)
