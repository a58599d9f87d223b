"""Thread host: runs a Worker loop on a Python thread of this process (in-process queues).
The right choice for CPU and for tests; the gateway sees the same WorkerHost interface.

Liveness: the loop's heartbeats feed a Watchdog. A thread cannot be killed, so a hung worker is
reported ERROR (not restarting: it gets no work) and sent a Reset; if its heartbeats resume and
the Reset has been applied, it is reported IDLE again, empty. A bug that escapes the loop is
reported ERROR and a fresh Worker is built on the same loaded model after a backoff."""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from desktop.protocol import Command, Event, Heartbeat, Reset, Shutdown
from desktop.errors import OmnideskError
from desktop.model.loader import LoadedModel, ModelSpec
from desktop.workers.config import WorkerConfig
from desktop.workers.heartbeat import Liveness, Watchdog
from desktop.workers.load_watch import STUCK, LoadWatch
from desktop.protocol import EventSink, WorkerHost, WorkerState
from desktop.workers.hosting import CLOSE_S, EarlyCommands, Statuses
from desktop.workers.runtime import load_worker

if TYPE_CHECKING:
    from desktop.workers.worker import Worker

log = logging.getLogger(__name__)


class ThreadHost(WorkerHost):
    def __init__(self, worker_id: str, spec: ModelSpec, config: WorkerConfig = WorkerConfig(), threads: int | None = None,
                 *, liveness: Liveness = Liveness(), backoff: tuple[float, float] = (0.5, 30.0)):
        self.worker_id, self.spec, self.config, self.threads = worker_id, spec, config, threads
        self.liveness, (self.backoff_min, self.backoff_max) = liveness, backoff
        self.restarts = 0
        self._status = Statuses(worker_id, spec.device, config)
        self._inbox: EarlyCommands[Worker] = EarlyCommands()
        self._lock = threading.Lock()  # guards _hung_until
        self._thread: threading.Thread | None = None
        self._closing = False
        self._hung_until: int | None = None  # while hung: the Reset count that proves it came back
        self._watchdog = Watchdog(liveness, self._on_hung, f"watchdog-{worker_id}")
        self._load: LoadWatch | None = None

    def start(self, sink: EventSink) -> None:
        self._sink = sink
        self._thread = threading.Thread(target=self._run, name=f"worker-{self.worker_id}", daemon=True)
        self._thread.start()

    def _report(self, state: WorkerState, message: str = "", code: str = "", restarting: bool = False) -> None:
        self._sink(self.worker_id, self._status(state, message, code, restarting))

    def _emit(self, event: Event) -> None:
        self._sink(self.worker_id, event)

    def _run(self) -> None:
        watch = LoadWatch(self._load_stuck, self.liveness.load_hang_s, name=f"load-watch-{self.worker_id}")
        self._load = watch
        try:
            worker = load_worker(self.spec, self.config, self._emit, self._report, self.threads, watch)
        except OmnideskError as err:
            self._report(WorkerState.ERROR, err.message, err.code)
            return
        lm: LoadedModel = worker.lm
        delay = self.backoff_min
        while True:
            worker.stage.start()  # before submit() can reach it: never tokenise on the caller's (Qt) thread
            self._inbox.attach(worker)
            self._sink(self.worker_id, self._status.up(lm))
            self._watchdog.arm()
            started = time.monotonic()
            try:
                worker.serve(beat=self._beat, beat_s=self.liveness.beat_s)
                return  # Shutdown
            except Exception as exc:  # a bug of the loop itself, not of one request
                log.exception("Worker %s: the loop failed", self.worker_id)
                self._watchdog.disarm()
                if time.monotonic() - started > 60.0:
                    delay = self.backoff_min
                self._report(WorkerState.ERROR, f"The worker failed ({type(exc).__name__}: {exc}); restarting in {delay:.1f} s.",
                             "worker_crashed", restarting=True)
            time.sleep(delay)
            delay = min(delay * 2, self.backoff_max)
            if self._closing:
                return
            self.restarts += 1
            from desktop.workers.worker import Worker

            worker = Worker(lm, self.config, emit=self._emit)

    def _beat(self, beat: Heartbeat) -> None:
        """On the worker's thread. While hung, wait until the Reset is applied, then come back."""
        with self._lock:
            if self._hung_until is not None:
                if beat.resets < self._hung_until or beat.running or self._closing:
                    return
                self._hung_until = None
                back = self._inbox.worker
            else:
                back = None
        if back is not None:
            log.warning("Worker %s responds again; it is back, empty", self.worker_id)
            self._sink(self.worker_id, self._status.up(back.lm))
            self._watchdog.arm()
        self._watchdog.beat(beat)

    def _on_hung(self, silent_s: float) -> None:
        with self._lock:
            worker = self._inbox.worker
            if worker is None or self._closing:
                return
            self._hung_until = worker.resets + 1
            worker.submit(Reset())
        self._report(WorkerState.ERROR, f"it stopped responding (no progress for {silent_s:.1f} s)", "worker_hung")

    def _load_stuck(self, silent_s: float) -> None:
        """The load made no progress: reported like a hung worker (not restarting: the gateway fails
        what waits for it). The thread cannot be stopped; should the load finish after all, the
        worker reports itself up as usual."""
        if not self._closing:
            self._report(WorkerState.ERROR, STUCK.format(s=silent_s), "worker_hung")

    def submit(self, cmd: Command) -> None:
        self._inbox.submit(cmd)

    def close(self, timeout: float = CLOSE_S) -> None:
        self._closing = True
        self._watchdog.close()
        self.submit(Shutdown())
        if self._thread is not None:
            stuck = self._hung_until is not None or (self._load is not None and self._load.stuck)
            self._thread.join(min(timeout, 0.5) if stuck else timeout)
