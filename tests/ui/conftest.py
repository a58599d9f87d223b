"""UI test fixtures: a qasync event loop on pytest-qt's QApplication, and failure on any exception
that reached the loop's exception handler or sys.excepthook (asyncSlot sends them there)."""

from __future__ import annotations

import asyncio
import gc
import sys
from pathlib import Path

import pytest
import qasync

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture(autouse=True)
def collect_qt_garbage_here():
    """Cyclic garbage is collected on the Qt thread only, as the app does (desktop/gc_policy.py):
    automatic collection is off during a UI test, and a collection runs after it. Left to
    chance, a worker thread (Piper, the voice relay, a model worker, an executor) runs the
    collection, destroys a leftover QObject off its thread ("Timers cannot be stopped from another
    thread"), and the next event segfaults (it did, in some orders of the chat tests)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.collect()
        if was_on:
            gc.enable()


@pytest.fixture
def aloop(qapp, monkeypatch):
    """A qasync loop; `aloop.run(coro, timeout)` runs a coroutine while Qt events are processed."""
    qapp.setQuitOnLastWindowClosed(False)  # as the app sets it: a bubble deleted last never quits the loop
    loop = qasync.QEventLoop(qapp)
    asyncio.set_event_loop(loop)
    errors: list = []
    loop.set_exception_handler(lambda _loop, ctx: errors.append(ctx.get("exception") or ctx.get("message")))
    monkeypatch.setattr(sys, "excepthook", lambda *exc: errors.append(exc[1]))

    def run(coro, timeout: float = 60.0):
        return loop.run_until_complete(asyncio.wait_for(coro, timeout))

    loop.run = run  # type: ignore[attr-defined]
    yield loop
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    asyncio.set_event_loop(None)
    loop.close()
    if errors:
        raise AssertionError(f"exceptions reached the event loop: {errors!r}")


@pytest.fixture
def screenshot():
    """Save a widget's picture under test-artifacts/ (look at it with an image viewer)."""

    def save(widget, name: str) -> Path:
        ARTIFACTS.mkdir(exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        widget.grab().save(str(path))
        return path

    return save


@pytest.fixture
def two_slot_gateway(aloop):
    """A gateway on the tiny model's worker with two KV slots."""
    from desktop.workers.config import WorkerConfig
    from ui_helpers import start_gateway

    gw = start_gateway(aloop, WorkerConfig(num_slots=2))
    yield gw
    aloop.run(gw.close())
