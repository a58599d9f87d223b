"""Drive a Worker on the calling thread: submit a command and step until its terminal event.
For the terminal chat, benchmarks and tests; hosts run the same Worker in a thread or process."""

from __future__ import annotations

import signal
import threading
from collections import defaultdict, deque
from contextlib import contextmanager
from typing import Callable, Iterator

from desktop.protocol import TERMINAL, Command, Event
from desktop.model.loader import LoadedModel
from desktop.workers.config import WorkerConfig
from desktop.workers.worker import Worker


@contextmanager
def interrupts_held() -> Iterator[None]:
    """Hold Ctrl-C back while the block runs, then raise KeyboardInterrupt once it is done.

    A worker step mutates the KV and the ids together; a KeyboardInterrupt raised in the middle
    (Python delivers SIGINT to the main thread between any two bytecodes, e.g. between two layers
    of a forward) left them one token apart and failed the next turn. Only Python's default
    handler is replaced, and only on the main thread, where signals are delivered."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    caught: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if caught:
        raise KeyboardInterrupt


class LocalClient:
    def __init__(self, loaded: LoadedModel, config: WorkerConfig = WorkerConfig(), on_step: Callable[[Worker], None] | None = None):
        self.events: dict[str, deque[Event]] = defaultdict(deque)
        self.worker = Worker(loaded, config, emit=self._collect)
        self.on_step = on_step

    def _collect(self, event: Event) -> None:
        self.events[event.request_id].append(event)

    def submit(self, cmd: Command) -> None:
        with interrupts_held():  # submitting tokenises (inline stage): a command goes in whole or not at all
            self.worker.submit(cmd)

    def stream(self, cmd: Command | None, request_id: str | None = None) -> Iterator[Event]:
        """Submit `cmd` (or follow an already submitted `request_id`) and yield its events as the
        worker produces them, ending with Done or ErrorEvent. Other requests advance meanwhile.

        Ctrl-C during a step surfaces as KeyboardInterrupt after that step, never inside it; the
        caller stops the request and follows it again with `stream(None, request_id)`."""
        if cmd is not None:
            self.submit(cmd)
            request_id = cmd.request_id
        box = self.events[request_id]
        while True:
            while box:
                event = box.popleft()
                yield event
                if isinstance(event, TERMINAL):
                    del self.events[request_id]
                    return
            with interrupts_held():
                busy = self.worker.step()
            if not busy and not box:
                raise RuntimeError(f"The worker went idle without finishing request {request_id!r}.")
            if self.on_step:
                self.on_step(self.worker)

    def run(self, cmd: Command) -> list[Event]:
        return list(self.stream(cmd))
