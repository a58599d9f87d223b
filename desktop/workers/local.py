"""Drive a Worker on the calling thread: submit a command and step until its terminal event.
For the terminal chat, benchmarks and tests; hosts run the same Worker in a thread or process."""

from __future__ import annotations

from collections import defaultdict, deque
from typing import Callable, Iterator

from desktop.engine.protocol import TERMINAL, Command, Event
from desktop.model.loader import LoadedModel
from desktop.workers.config import WorkerConfig
from desktop.workers.worker import Worker


class LocalClient:
    def __init__(self, loaded: LoadedModel, config: WorkerConfig = WorkerConfig(), on_step: Callable[[Worker], None] | None = None):
        self.events: dict[str, deque[Event]] = defaultdict(deque)
        self.worker = Worker(loaded, config, emit=self._collect)
        self.on_step = on_step

    def _collect(self, event: Event) -> None:
        self.events[event.request_id].append(event)

    def submit(self, cmd: Command) -> None:
        self.worker.submit(cmd)

    def stream(self, cmd: Command | None, request_id: str | None = None) -> Iterator[Event]:
        """Submit `cmd` (or follow an already submitted `request_id`) and yield its events as the
        worker produces them, ending with Done or ErrorEvent. Other requests advance meanwhile."""
        if cmd is not None:
            self.worker.submit(cmd)
            request_id = cmd.request_id
        box = self.events[request_id]
        while True:
            while box:
                event = box.popleft()
                yield event
                if isinstance(event, TERMINAL):
                    del self.events[request_id]
                    return
            if not self.worker.step() and not box:
                raise RuntimeError(f"The worker went idle without finishing request {request_id!r}.")
            if self.on_step:
                self.on_step(self.worker)

    def run(self, cmd: Command) -> list[Event]:
        return list(self.stream(cmd))
