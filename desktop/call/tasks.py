"""The asyncio tasks of one call: the loop it runs on (taken at its start), coroutines started on
it from any thread (the media thread, the transcriber's, the voice's), kept alive until they end
and awaited when the call settles or closes."""

from __future__ import annotations

import asyncio
from typing import Any, Callable


class CallTasks:
    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task] = set()

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
            task = loop.create_task(coro)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

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
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def wait_others(self) -> None:
        """Await every task but the current one, one at a time (the call is closing)."""
        for task in [t for t in self._tasks if t is not asyncio.current_task()]:
            await asyncio.gather(task, return_exceptions=True)
