"""Entry point of a spawned worker process: set the environment (CUDA_VISIBLE_DEVICES) before
torch is imported, load the model, then run the same Worker loop as the thread host over a pipe.
Imports nothing from Qt."""

from __future__ import annotations

import os
import threading


def child_main(conn, worker_id: str, spec, config, env: dict[str, str], threads: int | None) -> None:
    os.environ.update(env)  # before anything imports torch
    from desktop.engine.protocol import Shutdown
    from desktop.errors import OmnideskError
    from desktop.workers.host import WorkerState, WorkerStatus
    from desktop.workers.runtime import load_worker

    send_lock = threading.Lock()
    early: list = []
    holder: dict = {}
    hold_lock = threading.Lock()

    def send(msg) -> None:
        with send_lock:
            conn.send(msg)

    def status(state: WorkerState, message: str = "", lm=None) -> None:
        send(WorkerStatus(worker_id, state, message, spec.device, config.max_running, config.num_slots,
                          lm.name if lm else "", bool(lm and lm.supports_images)))

    def deliver(cmd) -> None:
        with hold_lock:
            if "worker" in holder:
                holder["worker"].submit(cmd)
            else:
                early.append(cmd)

    def read() -> None:  # commands arrive while the model is still loading too
        try:
            while True:
                cmd = conn.recv()
                deliver(cmd)
                if isinstance(cmd, Shutdown):
                    return
        except (EOFError, OSError):  # the parent is gone: stop
            deliver(Shutdown())

    threading.Thread(target=read, name="pipe-reader", daemon=True).start()
    try:
        worker = load_worker(spec, config, send, status, threads)
    except OmnideskError as err:
        status(WorkerState.ERROR, err.message)
        return
    with hold_lock:
        holder["worker"] = worker
        for cmd in early:
            worker.submit(cmd)
    status(WorkerState.IDLE, lm=worker.lm)
    worker.serve()
