"""Runs slow file work (scan, open, export, delete) on a short-lived thread and hands the result
back on the Qt thread, so the window never freezes on a large recording or a slow disk."""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from PySide6.QtCore import QObject, Signal

log = logging.getLogger(__name__)
Done = Callable[[Any, BaseException | None], None]


class Background(QObject):
    """`run(fn, done, *args)`: fn(*args) on a thread; done(result, error) later on the Qt thread.
    `busy` counts jobs not finished yet."""

    _finished = Signal(object, object, object)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.busy = 0
        self._finished.connect(self._deliver)

    def run(self, fn: Callable[..., Any], done: Done, *args: Any) -> None:
        self.busy += 1

        def work() -> None:
            try:
                result, error = fn(*args), None
            except Exception as exc:  # handed to `done`, which says it in the page
                result, error = None, exc
            try:
                self._finished.emit(done, result, error)
            except RuntimeError:  # the page was closed meanwhile: nobody waits for this any more
                log.debug("Recordings: a result arrived after its page was gone")

        threading.Thread(target=work, name="recordings-io", daemon=True).start()

    def _deliver(self, done: Done, result: Any, error: BaseException | None) -> None:
        self.busy -= 1
        if error is not None and not hasattr(error, "message"):
            log.error("Recordings: %s", error, exc_info=error)
        done(result, error)
