"""One later start of the embedded model, as the app makes it: a spawned worker process (the
ProcessHost the app uses) loads the default model, then answers one short chat. Run by
bench/models.py in a fresh process each time; prints one JSON line of monotonic stamps.

    python bench/ready_probe.py T0        # T0: time.perf_counter() of the caller before it started us

perf_counter is CLOCK_MONOTONIC on Linux, shared by every process, so the stamps of the caller,
this process and the worker's messages are on one clock. The stages are the worker's own LOADING
messages (when they arrive here), so the breakdown needs no change to the worker."""

from __future__ import annotations

import json
import sys
import time

STARTED = time.perf_counter()  # this process, after the interpreter came up


def main() -> None:
    t0 = float(sys.argv[1]) if len(sys.argv) > 1 else STARTED
    import os
    import threading

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from desktop.model.hardware import physical_cores
    from desktop.model.loader import ModelSpec
    from desktop.model.messages import Message
    from desktop.model.params import SamplingParams
    from desktop.protocol import Chat, ChunkEvent, Done, ErrorEvent, WorkerState, WorkerStatus
    from desktop.workers.config import WorkerConfig
    from desktop.workers.process_host import ProcessHost
    from desktop.workers.readiness import threads_for

    imported = time.perf_counter()
    stages: list[tuple[str, float]] = []
    ready, first, done = threading.Event(), threading.Event(), threading.Event()
    failure: list[str] = []

    def sink(_wid: str, event: object) -> None:
        now = time.perf_counter()
        if isinstance(event, WorkerStatus):
            if event.state is WorkerState.LOADING:
                stages.append((event.message, now))
            elif event.state is WorkerState.IDLE and not ready.is_set():
                stages.append(("ready", now))
                ready.set()
            elif event.state is WorkerState.ERROR:
                failure.append(event.message)
                ready.set(), first.set(), done.set()
        elif isinstance(event, ChunkEvent) and not first.is_set():
            stages.append(("first token", now))
            first.set()
        elif isinstance(event, ErrorEvent):
            failure.append(event.message)
            first.set(), done.set()
        elif isinstance(event, Done):
            done.set()

    host = ProcessHost("cpu0", ModelSpec("default", "auto", "cpu"), WorkerConfig(), threads=int(threads_for(physical_cores()).value))
    host.start(sink)
    ready.wait(300)
    asked = time.perf_counter()
    host.submit(Chat("probe", (Message("user", "Hello! What can you do?"),), SamplingParams(max_tokens=4)))
    first.wait(120)
    done.wait(60)
    cpu = cpu_seconds(host.process.pid) if host.process is not None else None
    host.close()
    print(json.dumps({
        "t0": t0, "started": STARTED, "imported": imported, "asked": asked,
        "stages": stages, "error": failure[0] if failure else "", "worker_cpu_s": cpu,
    }))


def cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system) a process has used so far, from /proc (None elsewhere): the cost
    of a start apart from how busy the machine was."""
    import os

    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


if __name__ == "__main__":
    main()
