"""Entry point of a spawned worker process: set the environment (CUDA_VISIBLE_DEVICES) before
torch is imported, load the model, then run the same Worker loop as the thread host over a pipe,
heartbeats included. A bug that escapes the loop is reported (ERROR, restarting) before the child
exits, so the host restarts it. Imports nothing from Qt."""

from __future__ import annotations

import logging
import os
import signal
import threading


def child_main(conn, worker_id: str, spec, config, env: dict[str, str], threads: int | None, beat_s: float = 0.5,
               load_hang_s: float = 120.0) -> None:
    os.environ.update(env)  # before anything imports torch
    # Ctrl-C in the terminal that started the app reaches the whole process group: the app shuts
    # its workers down in order; a child killed mid-step by SIGINT would only be restarted.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from desktop.protocol import Shutdown
    from desktop.errors import OmnideskError
    from desktop.protocol import WorkerState
    from desktop.workers.hosting import EarlyCommands, Statuses
    from desktop.workers.runtime import load_worker
    from desktop.workers.load_watch import STUCK, LoadWatch, others_cpu

    send_lock = threading.Lock()
    inbox = EarlyCommands()
    statuses = Statuses(worker_id, spec.device, config)

    def send(msg) -> None:
        with send_lock:
            conn.send(msg)

    def status(state: WorkerState, message: str = "", code: str = "", restarting: bool = False) -> None:
        send(statuses(state, message, code, restarting))

    def read() -> None:  # commands arrive while the model is still loading too
        while True:
            try:
                cmd = conn.recv()
            except (EOFError, OSError):  # the parent is gone: stop
                inbox.submit(Shutdown())
                return
            except Exception:  # a message that cannot be read: drop it, keep the pipe
                logging.getLogger(__name__).exception("Worker %s dropped an unreadable command", worker_id)
                continue
            inbox.submit(cmd)
            if isinstance(cmd, Shutdown):
                return

    def load_stuck(silent_s: float) -> None:  # reported like a hung worker, then this process ends
        status(WorkerState.ERROR, STUCK.format(s=silent_s), "worker_hung")  # not restarting: it would hang again
        os._exit(3)

    threading.Thread(target=read, name="pipe-reader", daemon=True).start()
    status(WorkerState.LOADING, "Starting…")  # the process is up: torch is imported next (seconds)
    watch = LoadWatch(load_stuck, load_hang_s, cpu=others_cpu)  # the whole process but the watcher: it only loads
    try:
        worker = load_worker(spec, config, send, status, threads, watch)
    except OmnideskError as err:
        status(WorkerState.ERROR, err.message, err.code)
        return
    worker.stage.start()  # before anyone can submit: never tokenise on the pipe reader, under the inbox's lock
    inbox.attach(worker)
    send(statuses.up(worker.lm))
    try:
        worker.serve(beat=send, beat_s=beat_s)
    except Exception as exc:  # a bug of the loop itself: say so, then die and be restarted
        status(WorkerState.ERROR, f"The worker failed ({type(exc).__name__}: {exc})", "worker_crashed", restarting=True)
        raise
