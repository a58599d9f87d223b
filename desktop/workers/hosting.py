"""What the hosts of a local Worker share: the WorkerStatus messages of one worker, and the buffer
that holds commands while its worker loads. Used by the thread host, the spawned child and the
process host. Imports no torch (the child imports it only after setting its environment)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from desktop.protocol import Command, WorkerState, WorkerStatus
from desktop.workers.config import WorkerConfig


@dataclass(frozen=True, slots=True)
class Statuses:
    """Builds the WorkerStatus messages of one worker, the same fields from every host."""

    worker_id: str
    device: str
    config: WorkerConfig

    def __call__(self, state: WorkerState, message: str = "", code: str = "", restarting: bool = False) -> WorkerStatus:
        return WorkerStatus(self.worker_id, state, message, self.device, self.config.max_running, self.config.num_slots,
                            code=code, restarting=restarting)

    def up(self, lm: Any) -> WorkerStatus:
        """IDLE: the worker has just loaded `lm` (a LoadedModel) and takes work."""
        return WorkerStatus(self.worker_id, WorkerState.IDLE, "", self.device, self.config.max_running,
                            self.config.sized(lm.kv_bytes_per_token).num_slots, lm.name, bool(lm.supports_images), lm.context_length)


class Submits(Protocol):
    def submit(self, cmd: Command) -> None: ...


# How long closing a host waits for its worker: the Shutdown writes idle conversations to disk
# (Worker.close gives its writer 15 s), so a host waits longer than that before it kills.
CLOSE_S = 20.0

W = TypeVar("W", bound=Submits)


class EarlyCommands(Generic[W]):
    """A host's way in to its worker: commands that arrive before the worker exists (it is still
    loading) are held in order and handed to it when it is attached; after that they go straight
    through. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: list[Command] = []
        self.worker: W | None = None

    def submit(self, cmd: Command) -> None:
        with self._lock:
            if self.worker is None:
                self._held.append(cmd)
            else:
                self.worker.submit(cmd)

    def attach(self, worker: W) -> None:
        """Make `worker` the one commands go to, first handing it what was held."""
        with self._lock:
            self.worker = worker
            for cmd in self._held:
                worker.submit(cmd)
            self._held.clear()
