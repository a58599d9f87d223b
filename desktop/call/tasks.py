"""The asyncio tasks of one call: the loop it runs on (taken at its start), coroutines started on
it from any thread (the media thread, the transcriber's, the voice's), kept alive until they end
and awaited when the call settles or closes."""

from __future__ import annotations

import asyncio
from typing import Any, Callable

from desktop.tasks import TaskSet


class CallTasks:
    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self._tasks = TaskSet()

    def bind(self) -> None:
        """The running loop becomes the call's (at its start)."""
        self.loop = asyncio.get_running_loop()

    def spawn(self, coro: Any) -> None:
        """Run `coro` as a task on the call's loop (from any thread); before the call started it
        is closed unrun."""
        loop = self.loop
        if loop is None:
            coro.close()
            return

        def create() -> None:
            self._tasks.spawn(coro)

        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            create()
        else:
            loop.call_soon_threadsafe(create)

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """`fn(*args)` on the call's loop (from any thread); nothing before the call started."""
        loop = self.loop
        if loop is not None:
            loop.call_soon_threadsafe(fn, *args)

    async def settle(self) -> None:
        """Until no task is left (a task may start others)."""
        await self._tasks.wait()

    async def wait_others(self) -> None:
        """Await every task but the current one, one at a time (the call is closing)."""
        await self._tasks.settle()
