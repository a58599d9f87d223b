"""A GPU worker that never leaves the app without a model: if it fails before its model is up (a
driver error, out of GPU memory, a crash while loading), it is closed and a CPU worker is started
in its place, under the same worker id, with a notice that says why."""

from __future__ import annotations

import dataclasses
import logging
import threading
from typing import Callable

from desktop.protocol import WorkerHost, WorkerState, WorkerStatus
from desktop.protocol.commands import Command
from desktop.protocol.host import EventSink

log = logging.getLogger(__name__)


def notice(why: str) -> str:
    return f"Running on the CPU: the GPU could not load the model ({why.rstrip('.')})."


class CpuFallback(WorkerHost):
    def __init__(self, gpu: WorkerHost, cpu: Callable[[], WorkerHost]) -> None:
        self.worker_id = gpu.worker_id
        self._host, self._make_cpu = gpu, cpu
        self._sink: EventSink | None = None
        self._lock = threading.Lock()
        self._up = self._fell = self._closed = False
        self._notice = ""

    @property
    def host(self) -> WorkerHost:
        """The worker in use: the GPU's, or the CPU's after a fall-back."""
        return self._host

    @property
    def fell_back(self) -> bool:
        return self._fell

    def start(self, sink: EventSink) -> None:
        self._sink = sink
        self._host.start(self._from_gpu)

    def _from_gpu(self, _wid: str, event: object) -> None:
        assert self._sink is not None
        if isinstance(event, WorkerStatus):
            if event.state in (WorkerState.IDLE, WorkerState.BUSY):
                self._up = True
            elif event.state is WorkerState.ERROR and not self._up:
                with self._lock:
                    if self._fell or self._closed:
                        return
                    self._fell = True
                self._notice = notice(event.message or event.code or "unknown error")
                log.warning("%s: %s", self.worker_id, self._notice)
                self._sink(self.worker_id, WorkerStatus(self.worker_id, WorkerState.LOADING,
                                                        f"{self._notice} Loading it there…", device="cpu"))
                threading.Thread(target=self._fall_back, name=f"{self.worker_id}-fallback", daemon=True).start()
                return
        self._sink(self.worker_id, event)  # type: ignore[arg-type]

    def _fall_back(self) -> None:
        gpu = self._host
        gpu.close()
        with self._lock:
            if self._closed:
                return
            self._host = self._make_cpu()
        self._host.start(self._from_cpu)

    def _from_cpu(self, _wid: str, event: object) -> None:
        assert self._sink is not None
        if isinstance(event, WorkerStatus):
            message = event.message if event.message or event.state is WorkerState.LOADING else self._notice
            event = dataclasses.replace(event, worker_id=self.worker_id, message=message)
        self._sink(self.worker_id, event)  # type: ignore[arg-type]

    def submit(self, cmd: Command) -> None:
        self._host.submit(cmd)

    def close(self, timeout: float = 5.0) -> None:
        with self._lock:
            self._closed = True
            host = self._host
        host.close(timeout)
