"""The Voice's relay: its own thread, which runs the commands the Voice queues to itself (typed,
one small record each) in order, so that `speak_delta` never blocks its caller, and between them
checks for replies that have played out."""

from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass, field
from typing import Callable, Union

import numpy as np

log = logging.getLogger(__name__)
POLL_S = 0.02  # how often the relay looks for replies that have played out


@dataclass(frozen=True, slots=True)
class Load:
    """Load the TTS engine now (in the background), before the first reply needs it."""


@dataclass(frozen=True, slots=True)
class Reload:
    """Drop the loaded engine: the next reply loads the new one."""


@dataclass(frozen=True, slots=True)
class Close:
    """Wake the relay so that it sees it is closed."""


@dataclass(frozen=True, slots=True)
class Begin:
    """A reply starts: load the engine if it is not yet."""

    request_id: str


@dataclass(frozen=True, slots=True)
class Delta:
    """More of a reply's text, for the pipeline."""

    request_id: str
    text: str


@dataclass(frozen=True, slots=True)
class End:
    """All of a reply's text was given."""

    request_id: str


@dataclass(frozen=True, slots=True)
class Replay:
    """Play a reply's kept audio again, as sink id `sink_id`, unless a stop came after replay `gen`."""

    request_id: str
    sink_id: str
    gen: int
    samples: np.ndarray = field(compare=False)
    rate: int


Command = Union[Load, Reload, Close, Begin, Delta, End, Replay]
ForReply = (Begin, Delta, End, Replay)  # the commands of one reply: its request_id fails if they raise


class Relay:
    """Runs `handle(command)` for each command put, in order, on a daemon thread; after each
    (and every `poll_s` without one) `tick()`. A command that raises is logged and given to
    `on_error(command, exc)`; the relay goes on. `halt()` ends the loop at its next turn."""

    def __init__(self, handle: Callable[[Command], None], tick: Callable[[], None],
                 on_error: Callable[[Command, Exception], None], *, poll_s: float = POLL_S) -> None:
        self._handle, self._tick, self._on_error, self._poll_s = handle, tick, on_error, poll_s
        self._commands: queue.SimpleQueue[Command] = queue.SimpleQueue()
        self._halted = threading.Event()
        self._thread = threading.Thread(target=self._run, name="voice-relay", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def put(self, command: Command) -> None:
        self._commands.put(command)

    def halt(self) -> None:
        self._halted.set()
        self._commands.put(Close())

    def join(self, timeout: float) -> None:
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=timeout)

    def _run(self) -> None:
        while not self._halted.is_set():
            try:
                command: Command | None = self._commands.get(timeout=self._poll_s)
            except queue.Empty:
                command = None
            if command is not None and not self._halted.is_set():
                try:
                    self._handle(command)
                except Exception as exc:  # a bug here must not end the relay
                    log.exception("voice command %s failed", type(command).__name__)
                    self._on_error(command, exc)
            self._tick()
