"""The interface every worker host offers the gateway, whatever its transport (thread,
spawned subprocess, remote server): submit typed commands, receive typed events and statuses."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable

from desktop.protocol.commands import Command
from desktop.protocol.events import Event


class WorkerState(str, Enum):
    LOADING = "loading"
    IDLE = "idle"
    BUSY = "busy"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class WorkerStatus:
    """Sent by a host when its state changes (loaded, crashed, hung, restarted). For ERROR, `code`
    says why (model_load, worker_crashed, worker_hung) and `restarting` whether the host is bringing
    the worker back by itself; an ERROR that is not restarting cannot serve until something changes."""

    worker_id: str
    state: WorkerState
    message: str = ""
    device: str = "cpu"
    capacity: int = 1  # sequences it can run at once (continuous batching)
    num_slots: int = 1
    model: str = ""  # the loaded model's display name (set once IDLE)
    supports_images: bool = False
    context_length: int = 0  # the model's context window in tokens (set once IDLE)
    code: str = ""
    restarting: bool = False


EventSink = Callable[[str, "Event | WorkerStatus"], None]
"""Called with (worker_id, event) from any thread; the gateway hops onto its own loop."""


class WorkerHost(ABC):
    """A worker as the gateway sees it. Hosts never block the caller of `submit`."""

    worker_id: str

    @abstractmethod
    def start(self, sink: EventSink) -> None:
        """Begin loading; report WorkerStatus(LOADING → IDLE or ERROR) and later events via sink."""

    @abstractmethod
    def submit(self, cmd: Command) -> None:
        """Queue a command for the worker loop."""

    @abstractmethod
    def close(self, timeout: float = 5.0) -> None:
        """Stop the loop and free the model; in-flight requests end with an error event."""
