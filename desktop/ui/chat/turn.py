"""One chat turn as an asyncio task: send the conversation to the gateway and report what its
events mean to a listener (queued, started, text so far, done, error). Qt-free on purpose."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import asdict
from typing import Any, Coroutine, Protocol

from desktop.engine.conversations import Conversation, StoredMessage
from desktop.engine.protocol import ChunkEvent, Done, ErrorEvent, PrefillDone, Queued, QueueDone, QueueUpdate
from desktop.errors import OmnideskError, UnknownRequest
from desktop.model.params import SamplingParams

LOADING_POLL_S = 0.25  # how often a turn sent while the model loads checks whether it is up


class TurnListener(Protocol):
    def turn_loading(self, turn: Turn) -> None: ...
    def turn_queued(self, turn: Turn, position: int, eta_s: float) -> None: ...
    def turn_started(self, turn: Turn) -> None: ...
    def turn_text(self, turn: Turn, text: str) -> None: ...
    def turn_done(self, turn: Turn, text: str, stats: dict[str, Any]) -> None: ...
    def turn_failed(self, turn: Turn, code: str, message: str, retryable: bool) -> None: ...


def request_messages(conv: Conversation) -> list[dict[str, Any]]:
    """What the gateway gets: the system prompt, then every message (images as content parts)."""
    out: list[dict[str, Any]] = [{"role": "system", "content": conv.system_prompt}] if conv.system_prompt else []
    for m in conv.messages:
        if m.images:
            parts = [{"type": "image", "path": p} for p in m.images] + [{"type": "text", "text": m.content}]
            out.append({"role": m.role, "content": parts})
        else:
            out.append({"role": m.role, "content": m.content})
    return out


class Turn:
    """`previous` is the reply a Regenerate took away: it comes back if no new reply arrives."""

    def __init__(self, gateway: Any, conv: Conversation, params: SamplingParams, listener: TurnListener,
                 previous: StoredMessage | None = None) -> None:
        self.gateway, self.conv, self.params, self.listener = gateway, conv, params, listener
        self.previous = previous
        self.request_id: str | None = None
        self.text = ""
        self._stop_asked = False
        self._ended = False

    @property
    def ended(self) -> bool:
        """Whether the listener got the turn's end (done or failed)."""
        return self._ended

    async def run(self) -> None:
        try:
            stream = await self._open()
        except OmnideskError as exc:  # refused at the door: queue full, invalid request, shut down
            self._ended = True
            self.listener.turn_failed(self, exc.code, exc.message, exc.retryable)
            return
        if stream is None:  # stopped while the model was still loading
            self._ended = True
            self.listener.turn_done(self, "", {})
            return
        self.request_id = stream.request_id
        if self._stop_asked:
            await self._cancel()
        try:
            async for event in stream:
                self._on_event(event)
        except asyncio.CancelledError:  # the page is going away: do not leave the request running
            if not self._ended:
                await asyncio.shield(self._cancel())
            raise

    async def _open(self) -> Any:
        """The request's event stream; while the model is still loading ("not_ready"), wait for it."""
        while True:
            try:
                return self.gateway.chat(request_messages(self.conv), self.params)
            except OmnideskError as exc:
                if exc.code != "not_ready":
                    raise
            if self._stop_asked:
                return None
            self.listener.turn_loading(self)
            await asyncio.sleep(LOADING_POLL_S)

    def _on_event(self, event: Any) -> None:
        listener = self.listener
        if isinstance(event, (Queued, QueueUpdate)):
            listener.turn_queued(self, event.position, event.eta_s)
        elif isinstance(event, (QueueDone, PrefillDone)):
            listener.turn_started(self)
        elif isinstance(event, ChunkEvent):
            self.text += event.text_delta
            listener.turn_text(self, self.text)
        elif isinstance(event, Done):
            self._ended = True
            listener.turn_done(self, event.text or self.text, asdict(event.stats))
        elif isinstance(event, ErrorEvent):
            self._ended = True
            listener.turn_failed(self, event.code, event.message, event.retryable)

    async def stop(self) -> None:
        """Stop the reply (or leave the queue); the turn then ends with what was written."""
        self._stop_asked = True
        if self.request_id is not None and not self._ended:
            await self._cancel()

    async def _cancel(self) -> None:
        try:
            await self.gateway.cancel(self.request_id)
        except UnknownRequest:  # it ended meanwhile
            pass


class Tasks:
    """Strong references to running tasks; an exception in one goes to sys.excepthook (the
    app's error dialog, a failing test) instead of vanishing with the task."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            sys.excepthook(type(exc), exc, exc.__traceback__)

    def __len__(self) -> int:
        return len(self._tasks)

    async def wait(self) -> None:
        """Wait for every task running now (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
