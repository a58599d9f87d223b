"""Subprocess host: the Worker loop in a child started with an explicit `spawn` context, typed
messages over a pipe. One per GPU; a crashed child fails its requests (via the gateway, which sees
WorkerStatus ERROR at once) and is restarted with exponential backoff."""

from __future__ import annotations

import multiprocessing as mp
import threading
from dataclasses import replace

from desktop.engine.protocol import Command, Shutdown
from desktop.model.loader import ModelSpec
from desktop.workers.child import child_main
from desktop.workers.config import WorkerConfig
from desktop.workers.host import EventSink, WorkerHost, WorkerState, WorkerStatus


class ProcessHost(WorkerHost):
    def __init__(
        self,
        worker_id: str,
        spec: ModelSpec,
        config: WorkerConfig = WorkerConfig(),
        *,
        gpu: int | None = None,
        threads: int | None = None,
        backoff: tuple[float, float] = (0.5, 30.0),
    ) -> None:
        self.worker_id, self.config, self.threads = worker_id, config, threads
        self.env = {"CUDA_VISIBLE_DEVICES": str(gpu)} if gpu is not None else {}
        self.spec = replace(spec, device="cuda:0") if gpu is not None else spec
        self.backoff_min, self.backoff_max = backoff
        self._backoff = self.backoff_min
        self._lock = threading.Lock()
        self._closing = False
        self._conn = None
        self.process = None
        self.restarts = 0

    def start(self, sink: EventSink) -> None:
        self._sink = sink
        self._spawn()

    def _spawn(self) -> None:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        proc = ctx.Process(
            target=child_main,
            args=(child, self.worker_id, self.spec, self.config, self.env, self.threads),
            name=f"omnidesk-worker-{self.worker_id}",
            daemon=True,
        )
        proc.start()
        child.close()
        with self._lock:
            self._conn, self.process = parent, proc
        threading.Thread(target=self._read, args=(parent, proc), name=f"host-{self.worker_id}", daemon=True).start()

    def _read(self, conn, proc) -> None:
        """Forward the child's messages; on EOF the child has died: report, then restart."""
        load_failed = False
        try:
            while True:
                msg = conn.recv()
                if isinstance(msg, WorkerStatus):
                    load_failed = msg.state is WorkerState.ERROR
                    if msg.state is WorkerState.IDLE:
                        self._backoff = self.backoff_min
                self._sink(self.worker_id, msg)
        except (EOFError, OSError):
            pass
        proc.join(timeout=2.0)
        if self._closing or load_failed:  # a model that cannot load will not load on retry either
            return
        delay = self._backoff
        self._backoff = min(self._backoff * 2, self.backoff_max)
        self._sink(self.worker_id, self._status(WorkerState.ERROR, f"The worker process stopped unexpectedly (exit code {proc.exitcode}); restarting in {delay:.1f} s."))
        timer = threading.Timer(delay, self._restart)
        timer.daemon = True
        timer.start()

    def _restart(self) -> None:
        if not self._closing:
            self.restarts += 1
            self._spawn()

    def _status(self, state: WorkerState, message: str) -> WorkerStatus:
        return WorkerStatus(self.worker_id, state, message, self.spec.device, self.config.max_running, self.config.num_slots)

    def submit(self, cmd: Command) -> None:
        with self._lock:
            try:
                self._conn.send(cmd)
            except (OSError, EOFError, ValueError):
                pass  # the child is gone; its reader reports the crash and the gateway fails the request

    def close(self, timeout: float = 5.0) -> None:
        self._closing = True
        self.submit(Shutdown())
        proc = self.process
        if proc is not None:
            proc.join(timeout)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout)
