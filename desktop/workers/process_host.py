"""Subprocess host: the Worker loop in a child started with an explicit `spawn` context, typed
messages over a pipe. One per GPU; a crashed child fails its requests (via the gateway, which sees
WorkerStatus ERROR at once) and is restarted with exponential backoff. A child whose heartbeats
stop (hung, or stopped with SIGSTOP) is declared hung by a Watchdog, killed and restarted the same
way. Commands go through a sender thread, so `submit` never blocks on a child that stopped reading."""

from __future__ import annotations

import logging
import multiprocessing as mp
import queue
import threading
from dataclasses import replace

from desktop.protocol import Command, Heartbeat, Shutdown
from desktop.model.loader import ModelSpec
from desktop.workers.child import child_main
from desktop.workers.config import WorkerConfig
from desktop.workers.heartbeat import Liveness, Watchdog
from desktop.protocol import EventSink, WorkerHost, WorkerState, WorkerStatus
from desktop.workers.hosting import CLOSE_S, Statuses

log = logging.getLogger(__name__)


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
        liveness: Liveness = Liveness(),
    ) -> None:
        self.worker_id, self.config, self.threads, self.liveness = worker_id, config, threads, liveness
        self.env = {"CUDA_VISIBLE_DEVICES": str(gpu)} if gpu is not None else {}
        self.spec = replace(spec, device="cuda:0") if gpu is not None else spec
        self._status = Statuses(worker_id, self.spec.device, config)
        self.backoff_min, self.backoff_max = backoff
        self._backoff = self.backoff_min
        self._lock = threading.Lock()
        self._closing = False
        self._outbox: queue.SimpleQueue = queue.SimpleQueue()  # the current child's commands
        self._hung: str | None = None  # why the watchdog killed the current child
        self._watchdog = Watchdog(liveness, self._on_hung, f"watchdog-{worker_id}")
        self.process = None
        self._spawner: threading.Thread | None = None
        self.restarts = 0

    def start(self, sink: EventSink) -> None:
        self._sink = sink
        # Spawning costs its caller ~20 ms (lazy imports, fork/exec, thread starts); the caller is
        # the app's Qt thread, so the first child is spawned from a thread of its own.
        self._spawner = threading.Thread(target=self._spawn, name=f"host-spawn-{self.worker_id}", daemon=True)
        self._spawner.start()

    def _spawn(self) -> None:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        proc = ctx.Process(
            target=child_main,
            args=(child, self.worker_id, self.spec, self.config, self.env, self.threads, self.liveness.beat_s,
                  self.liveness.load_hang_s),
            name=f"omnidesk-worker-{self.worker_id}",
            daemon=True,
        )
        proc.start()
        child.close()
        with self._lock:
            self.process, self._hung, outbox = proc, None, self._outbox
        threading.Thread(target=self._send, args=(parent, outbox), name=f"host-send-{self.worker_id}", daemon=True).start()
        threading.Thread(target=self._read, args=(parent, proc), name=f"host-{self.worker_id}", daemon=True).start()

    def _send(self, conn, outbox: queue.SimpleQueue) -> None:
        """Feed one child its commands; ends when the child is gone (its outbox is then replaced)."""
        while True:
            cmd = outbox.get()
            if cmd is None:
                return
            try:
                conn.send(cmd)
            except (OSError, EOFError, ValueError):
                return  # the child is gone; its reader reports it and the gateway fails its requests

    def _read(self, conn, proc) -> None:
        """Forward the child's messages; on EOF the child has died: report, then restart."""
        load_failed = False
        try:
            while True:
                msg = conn.recv()
                if isinstance(msg, Heartbeat):
                    self._watchdog.beat(msg)
                    continue
                if isinstance(msg, WorkerStatus):
                    load_failed = msg.state is WorkerState.ERROR and not msg.restarting
                    if msg.state is WorkerState.IDLE:
                        self._backoff = self.backoff_min
                        self._watchdog.arm()
                    elif msg.state is WorkerState.ERROR:
                        self._watchdog.disarm()
                self._sink(self.worker_id, msg)
        except (EOFError, OSError):
            pass
        self._watchdog.disarm()
        proc.join(timeout=2.0)
        with self._lock:
            self._outbox.put(None)  # stop the sender; commands from now on wait for the next child
            self._outbox = queue.SimpleQueue()
        if self._closing or load_failed:  # a model that cannot load will not load on retry either
            return
        delay = self._backoff
        self._backoff = min(self._backoff * 2, self.backoff_max)
        why = self._hung or f"The worker process stopped unexpectedly (exit code {proc.exitcode})"
        self._sink(self.worker_id, self._status(WorkerState.ERROR, f"{why}; restarting in {delay:.1f} s.",
                                                "worker_hung" if self._hung else "worker_crashed", restarting=True))
        timer = threading.Timer(delay, self._restart)
        timer.daemon = True
        timer.start()

    def _on_hung(self, silent_s: float) -> None:
        """The watchdog gave up on the child: fail its requests now, then kill it (the reader then
        sees EOF and restarts it). SIGKILL also ends a stopped process."""
        with self._lock:
            proc = self.process
            if proc is None or self._closing:
                return
            self._hung = f"It stopped responding (no progress for {silent_s:.1f} s)"
        self._sink(self.worker_id, self._status(WorkerState.ERROR, f"{self._hung}; restarting.", "worker_hung",
                                                restarting=True))
        proc.kill()

    def _restart(self) -> None:
        if not self._closing:
            self.restarts += 1
            self._spawn()

    def submit(self, cmd: Command) -> None:
        with self._lock:
            self._outbox.put(cmd)

    def close(self, timeout: float = CLOSE_S) -> None:
        self._closing = True
        if self._spawner is not None:
            self._spawner.join(timeout)  # the first child exists (or never will) before it is closed
        self._watchdog.close()
        self.submit(Shutdown())
        proc = self.process
        if proc is not None:
            proc.join(timeout if self._hung is None else 0.0)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout)
