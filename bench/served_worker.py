"""A Worker served on its own thread over an already loaded model, as the thread host serves it
(`Worker.serve` until `Shutdown`), for benches that restart workers many times without loading
the model again (bench/restart.py): a new ServedWorker is a new worker (empty slots, a new KV
pool, a new disk tier over the same folder), and `close` shuts it down as the app's quit does."""

from __future__ import annotations

import queue
import threading
import time
from collections import defaultdict

from desktop.model.loader import LoadedModel
from desktop.protocol import TERMINAL, Command, Event, Shutdown
from desktop.workers.config import WorkerConfig
from desktop.workers.worker import Worker


class ServedWorker:
    def __init__(self, lm: LoadedModel, config: WorkerConfig, name: str = "bench") -> None:
        self._boxes: dict[str, queue.Queue] = defaultdict(queue.Queue)
        self._lock = threading.Lock()
        self.worker = Worker(lm, config, emit=self._emit)
        self._thread = threading.Thread(target=self.worker.serve, name=f"worker-{name}", daemon=True)
        self._thread.start()

    def _box(self, request_id: str) -> queue.Queue:
        with self._lock:
            return self._boxes[request_id]

    def _emit(self, event: Event) -> None:
        rid = getattr(event, "request_id", None)
        if rid is not None:
            self._box(rid).put((time.perf_counter(), event))

    def run(self, cmd: Command, timeout: float = 1800.0) -> list[tuple[float, Event]]:
        """Submit `cmd` and wait for its terminal event: its events, each with the time it came
        (perf_counter), the first entry being (submit time, the command)."""
        box = self._box(cmd.request_id)
        out = [(time.perf_counter(), cmd)]
        self.worker.submit(cmd)
        deadline = time.monotonic() + timeout
        while True:
            at, event = box.get(timeout=max(0.1, deadline - time.monotonic()))
            out.append((at, event))
            if isinstance(event, TERMINAL):
                with self._lock:
                    del self._boxes[cmd.request_id]
                return out

    def close(self, timeout: float = 600.0) -> float:
        """Shut the worker down as its host does on quit; returns the seconds it took."""
        start = time.perf_counter()
        self.worker.submit(Shutdown())
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise RuntimeError(f"The worker did not shut down within {timeout:.0f} s.")
        return time.perf_counter() - start
