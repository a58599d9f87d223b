"""Tasks keeps strong references to a page's running asyncio tasks (the chat page's replies, the
call page's work)."""

from __future__ import annotations

import asyncio
import sys
from typing import Any, Coroutine


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
