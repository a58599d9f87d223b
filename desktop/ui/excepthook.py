"""The global exception hook: anything uncaught (a slot, an asyncSlot, a task, a thread) is logged
with its traceback and shown in a non-modal error dialog; the app keeps running."""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import traceback
from types import TracebackType
from typing import Callable

from PySide6.QtCore import QObject, Qt, Signal, Slot
from PySide6.QtWidgets import QMessageBox, QWidget

from desktop.errors import OmnideskError
from desktop.logs import log_path

log = logging.getLogger("omnidesk.uncaught")
ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]


class ExceptionHook(QObject):
    """Install with `install(loop)`; `uninstall()` puts the previous hooks back. Reports from any
    thread hop onto the Qt thread through a queued signal. While an error dialog is open, later
    errors are counted in it instead of stacking new dialogs."""

    _report = Signal(str, str)  # summary, details

    def __init__(self, parent_window: Callable[[], QWidget | None] = lambda: None) -> None:
        super().__init__()
        self._parent_window = parent_window
        self._report.connect(self._show, Qt.ConnectionType.QueuedConnection)
        self._previous: tuple | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.dialog: QMessageBox | None = None
        self.count = 0  # exceptions seen since install (tests read it)
        self._unshown = 0

    # ------------------------------------------------------------------ install

    def install(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        if self._previous is None:
            self._previous = (sys.excepthook, threading.excepthook)
        sys.excepthook = self.handle
        threading.excepthook = self._thread_hook
        if loop is not None:
            self._loop = loop
            loop.set_exception_handler(self._loop_hook)

    def uninstall(self) -> None:
        if self._previous is not None:
            sys.excepthook, threading.excepthook = self._previous
            self._previous = None
        if self._loop is not None and not self._loop.is_closed():
            self._loop.set_exception_handler(None)
        self._loop = None

    # ------------------------------------------------------------------ entry points

    def handle(self, exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        """sys.excepthook: log with traceback, then show (on the Qt thread)."""
        if issubclass(exc_type, KeyboardInterrupt):
            log.info("Interrupted")
            return
        self.count += 1
        log.error("Uncaught exception", exc_info=(exc_type, exc, tb))
        details = "".join(traceback.format_exception(exc_type, exc, tb))
        self._report.emit(summary(exc), details)

    def _thread_hook(self, args: threading.ExceptHookArgs) -> None:
        if args.exc_value is not None:
            self.handle(args.exc_type, args.exc_value, args.exc_traceback)

    def _loop_hook(self, loop: asyncio.AbstractEventLoop, context: dict) -> None:
        exc = context.get("exception")
        if isinstance(exc, BaseException) and not isinstance(exc, asyncio.CancelledError):
            self.handle(type(exc), exc, exc.__traceback__)
        else:  # e.g. "Task was destroyed but it is pending": worth a log line, not a dialog
            log.warning("Event loop: %s", context.get("message", context))

    # ------------------------------------------------------------------ the dialog

    @Slot(str, str)
    def _show(self, text: str, details: str) -> None:
        if self.dialog is not None and self.dialog.isVisible():
            self._unshown += 1
            more = "another error" if self._unshown == 1 else f"{self._unshown} more errors"
            self.dialog.setInformativeText(f"{_advice()}\n\n({more} happened since; see the log.)")
            return
        self._unshown = 0
        box = QMessageBox(QMessageBox.Icon.Critical, "Omnidesk: something went wrong", text,
                          QMessageBox.StandardButton.Close, self._parent_window())
        box.setTextFormat(Qt.TextFormat.PlainText)  # an error's message may quote user text
        box.setInformativeText(_advice())
        box.setDetailedText(details)
        box.setWindowModality(Qt.WindowModality.NonModal)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.destroyed.connect(self._forget)
        self.dialog = box
        box.show()  # never exec(): it would nest an event loop inside a running task

    @Slot()
    def _forget(self) -> None:
        self.dialog = None


def summary(exc: BaseException) -> str:
    """One friendly line: an OmnideskError's own message, else the exception's type and text."""
    if isinstance(exc, OmnideskError):
        return exc.message
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"An unexpected error occurred: {type(exc).__name__}{': ' + text if text else ''}"


def _advice() -> str:
    return f"Omnidesk keeps running. The details were written to the log file:\n{log_path()}"
