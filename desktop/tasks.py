"""Background asyncio tasks kept alive until they end (the loop holds only weak references to
them), with the ways their owners wait for them or cancel them at shutdown."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine, Iterator
from typing import Any


class TaskSet:
    """Strong references to running tasks, each dropped when it ends. With `report_errors`, an
    exception that ends a task goes to sys.excepthook (the app's error dialog, a failing test)
    instead of vanishing with it."""

    def __init__(self, report_errors: bool = False) -> None:
        self._tasks: set[asyncio.Task] = set()
        self._report = report_errors

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task:
        """Run `coro` as a task on the running loop, kept until it ends."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if self._report and not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            sys.excepthook(type(exc), exc, exc.__traceback__)

    def __len__(self) -> int:
        return len(self._tasks)

    def __iter__(self) -> Iterator[asyncio.Task]:
        return iter(list(self._tasks))

    async def wait(self) -> None:
        """Wait until no task is left, those started meanwhile included (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def settle(self) -> None:
        """Wait for each task running now but the caller's own, one after the other."""
        for task in self._others():
            await asyncio.gather(task, return_exceptions=True)

    async def cancel_all(self) -> None:
        """Cancel every task but the caller's own, and wait for them to end."""
        for task in self._others():
            task.cancel()
        await asyncio.gather(*self._others(), return_exceptions=True)

    def _others(self) -> list[asyncio.Task]:
        return [t for t in self._tasks if t is not asyncio.current_task()]
