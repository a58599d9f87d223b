"""Telling waiting requests where they are in the queue: the first position at once, a move up
at most every `every_s` (each start moves every waiting request: 50 waiting clients would
otherwise get ~1,000 updates between them, each one a wake-up of its reader on the loop)."""

from __future__ import annotations

import asyncio
from desktop.gateway.request import Request, Status
from desktop.protocol import QueueDone, Queued, QueueUpdate


class Positions:
    """The pool's position callbacks for one gateway; `every_s` ≤ 0 sends every move at once."""

    def __init__(self, every_s: float) -> None:
        self._every_s = every_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._moved: dict[str, Request] = {}  # waiting requests whose new position is not sent yet
        self._flush: asyncio.TimerHandle | None = None

    def listen(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def close(self) -> None:
        if self._flush is not None:
            self._flush.cancel()

    def on_position(self, req: Request, first: bool) -> None:
        """A queued request's position changed (first: it has just been queued)."""
        req.status = Status.QUEUED
        if first or self._every_s <= 0 or self._loop is None:
            req.events.put_nowait((Queued if first else QueueUpdate)(req.request_id, req.position, req.eta_s))
            return
        self._moved[req.request_id] = req
        if self._flush is None:
            self._flush = self._loop.call_later(self._every_s, self._send)

    def started(self, req: Request) -> None:
        """A request was given its worker: one that was told Queued hears QueueDone."""
        if req.status is Status.QUEUED:
            req.events.put_nowait(QueueDone(req.request_id, req.waited_ms))
        req.status = Status.RUNNING

    def _send(self) -> None:
        """Each request that moved up since the last send and still waits hears where it is now."""
        self._flush = None
        moved, self._moved = self._moved, {}
        for req in moved.values():
            if req.status is Status.QUEUED and not req.done.done():  # neither started nor ended since
                req.events.put_nowait(QueueUpdate(req.request_id, req.position, req.eta_s))
