"""One request as a client sees it: an async iterator of its events that ends after its single
Done or ErrorEvent."""

from __future__ import annotations

from typing import Awaitable, Callable

from desktop.gateway.request import Request
from desktop.protocol import TERMINAL, Event


class RequestStream:
    """The events of one request in order, ending after its Done or ErrorEvent. The request runs
    whether or not anyone iterates; `aclose()` cancels it if it has not ended yet."""

    def __init__(self, request: Request, cancel: Callable[[str], Awaitable[None]]) -> None:
        self.request_id = request.request_id
        self._events, self._done, self._cancel = request.events, request.done, cancel
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
