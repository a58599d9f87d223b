"""A worker child whose model load hangs (no stage, no CPU: a model on a network folder that
stopped answering), for the load watchdog's subprocess test; importable by the spawned child."""

from __future__ import annotations

import threading


def stuck_child_main(*args, **kw) -> None:
    from desktop.workers import runtime
    from desktop.workers.child import child_main

    runtime.load_model = lambda spec, progress=None, **kw: threading.Event().wait()
    child_main(*args, **kw)
