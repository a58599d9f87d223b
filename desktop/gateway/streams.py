"""One request as the gateway tracks it (its pool entry, event queue, flags) and as a client
sees it: an async iterator of its events that ends after its single Done or ErrorEvent."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Awaitable, Callable

from desktop.gateway.pool import Entry
from desktop.protocol import TERMINAL, Event
from desktop.model.messages import Message


@dataclass(eq=False, slots=True)
class Request:
    """The gateway's record of a request, from admission to its terminal event."""

    entry: Entry
    events: asyncio.Queue = field(default_factory=asyncio.Queue)
    messages: tuple[Message, ...] = ()  # a chat's conversation (to mirror the slot without a snapshot)
    side: bool = False  # EndSession: sent straight to its worker, holds no capacity
    queued: bool = False  # it was told Queued, so it will be told QueueDone
    stop_sent: bool = False
    end_after: bool = False  # an abandoned create_session: end the session once it opens
    detached: bool = False  # its stream was ended by the gateway (an unanswered cancel); capacity still held
    chunks: list[str] = field(default_factory=list)  # text streamed so far (for a Done made by the gateway)

    @property
    def request_id(self) -> str:
        return self.entry.request_id


class RequestStream:
    """The events of one request in order, ending after its Done or ErrorEvent. The request runs
    whether or not anyone iterates; `aclose()` cancels it if it has not ended yet."""

    def __init__(self, request: Request, cancel: Callable[[str], Awaitable[None]]) -> None:
        self.request_id = request.request_id
        self._events, self._done, self._cancel = request.events, request.entry.done, cancel
        self._ended = False

    def __aiter__(self) -> RequestStream:
        return self

    async def __anext__(self) -> Event:
        if self._ended:
            raise StopAsyncIteration
        event = await self._events.get()
        self._ended = isinstance(event, TERMINAL)
        return event

    async def aclose(self) -> None:
        """Stop listening; a request that has not ended is cancelled."""
        if not self._done.done():
            await self._cancel(self.request_id)
        self._ended = True
