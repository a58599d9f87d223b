"""Thread host: runs a Worker loop on a Python thread of this process (in-process queues).
The right choice for CPU and for tests; the gateway sees the same WorkerHost interface."""

from __future__ import annotations

import threading

from desktop.engine.protocol import Command, Shutdown
from desktop.errors import OmnideskError
from desktop.model.loader import ModelSpec
from desktop.workers.config import WorkerConfig
from desktop.workers.host import EventSink, WorkerHost, WorkerState, WorkerStatus
from desktop.workers.runtime import load_worker


class ThreadHost(WorkerHost):
    def __init__(self, worker_id: str, spec: ModelSpec, config: WorkerConfig = WorkerConfig(), threads: int | None = None):
        self.worker_id, self.spec, self.config, self.threads = worker_id, spec, config, threads
        self.worker = None
        self._early: list[Command] = []
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self, sink: EventSink) -> None:
        self._thread = threading.Thread(target=self._run, args=(sink,), name=f"worker-{self.worker_id}", daemon=True)
        self._thread.start()

    def _run(self, sink: EventSink) -> None:
        def status(state: WorkerState, message: str = "", lm=None) -> None:
            sink(self.worker_id, WorkerStatus(self.worker_id, state, message, self.spec.device, self.config.max_running,
                                              self.config.num_slots, lm.name if lm else "", bool(lm and lm.supports_images)))

        try:
            worker = load_worker(self.spec, self.config, lambda e: sink(self.worker_id, e), status, self.threads)
        except OmnideskError as err:
            status(WorkerState.ERROR, err.message)
            return
        with self._lock:
            self.worker = worker
            for cmd in self._early:
                worker.submit(cmd)
            self._early.clear()
        status(WorkerState.IDLE, lm=worker.lm)
        worker.serve()

    def submit(self, cmd: Command) -> None:
        with self._lock:
            if self.worker is None:
                self._early.append(cmd)
            else:
                self.worker.submit(cmd)

    def close(self, timeout: float = 5.0) -> None:
        self.submit(Shutdown())
        if self._thread is not None:
            self._thread.join(timeout)
