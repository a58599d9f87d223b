"""The desktop app shell: QApplication + qasync loop (asyncio.Runner), the global exception hook,
and a shutdown sentinel that the window, Ctrl+C, SIGTERM/SIGHUP or Qt's aboutToQuit resolve (once)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

import qasync
from PySide6.QtCore import QTimer, qInstallMessageHandler
from PySide6.QtWidgets import QApplication

from desktop import __version__
from desktop.cli_signals import quit_signals
from desktop.composition import Composition
from desktop.gc_policy import collect_on_qt_thread
from desktop.logs import log_failure, setup_logging
from desktop.qtdeps import platform_problem, route_qt_messages
from desktop.settings import config_dir, load_settings
from desktop.ui.excepthook import ExceptionHook
from desktop.ui.icons import app_icon
from desktop.ui.single_instance import SingleInstance, second_launch

log = logging.getLogger(__name__)


def configure_app(app: QApplication) -> None:
    """Names, icon and style; the app quits when the main window closes, through the sentinel."""
    app.setApplicationName("omnidesk")
    app.setApplicationDisplayName("Omnidesk")
    app.setApplicationVersion(__version__)
    app.setOrganizationName("omnidesk")
    app.setDesktopFileName("omnidesk")
    app.setWindowIcon(app_icon())
    app.setStyle("Fusion")
    app.setQuitOnLastWindowClosed(False)
    collect_on_qt_thread(app)  # cyclic garbage: on the Qt thread only, in short passes (gc_policy)


class AppEventLoop(qasync.QEventLoop):
    """qasync's loop, except that the Qt events it processes once more after stopping (at the
    end of run_until_complete) still see it as the running loop: a task stepped there, e.g. one
    woken by the window closing while Qt quits, would otherwise die with "no running event loop"."""

    _completing = False

    def _after_run_forever(self) -> None:
        super()._after_run_forever()
        if self._completing:
            asyncio.events._set_running_loop(self)

    def run_until_complete(self, future: Any) -> Any:
        self._completing = True
        try:
            return super().run_until_complete(future)
        finally:
            self._completing = False
            asyncio.events._set_running_loop(None)


class QuitSentinel:
    """The shutdown sentinel: a future resolved once, by closing the window (Ctrl+Q), or, when
    Qt's loop was quit from outside (Ctrl+C, a session logout), by serve() once it runs again."""

    def __init__(self) -> None:
        self.future: asyncio.Future | None = None
        self.qt_quit = False
        self.requested = False  # a request before bind (a signal at start) is kept for it

    def bind(self, loop: asyncio.AbstractEventLoop) -> asyncio.Future:
        self.future = loop.create_future()
        if self.requested:
            self.future.set_result(None)
        return self.future

    def request(self) -> None:
        self.requested = True
        if self.future is not None and not self.future.done():
            self.future.set_result(None)

    def about_to_quit(self) -> None:
        # May fire more than once. The asyncio loop is not running now (qasync even steps due
        # callbacks outside it), so only note it: serve() resolves the future from a running loop.
        self.qt_quit = True


async def run_app(app: QApplication, *, settings_path: Path | None = None, exit_when_ready: bool = False,
                  started: Any = None, sentinel: QuitSentinel | None = None) -> int:
    """Run the app until the user quits. `started(composition)` is called once the window shows
    (tests); `exit_when_ready` quits as soon as the model has loaded (smoke tests)."""
    loop = asyncio.get_running_loop()
    sentinel = sentinel or QuitSentinel()
    quit_future = sentinel.bind(loop)
    hook = ExceptionHook(lambda: comp.window)
    hook.install(loop)
    app.aboutToQuit.connect(sentinel.about_to_quit)
    settings, warning = load_settings(settings_path)
    if warning:
        log.warning("%s", warning)
    comp = Composition(app, settings, warning=warning, settings_path=settings_path)
    comp.quit_requested.connect(sentinel.request)
    try:
        comp.start()
        if started is not None:
            started(comp)
        if exit_when_ready:
            comp.spawn(_quit_when_ready(comp, sentinel))
        await quit_future
        log.info("Shutting down")
    finally:
        await comp.shutdown()
        app.aboutToQuit.disconnect(sentinel.about_to_quit)
        hook.uninstall()
    return 0


async def _quit_when_ready(comp: Composition, sentinel: QuitSentinel) -> None:
    await comp.wait_ready()
    sentinel.request()


def serve(app: QApplication, **kwargs: Any) -> int:
    """Run `run_app` on a qasync loop in an asyncio.Runner. If Qt's loop is quit from outside,
    the runner is entered again, with the sentinel resolved, until run_app has shut down."""
    async def wait(task: asyncio.Task) -> int:
        return await task

    sentinel = QuitSentinel()
    with asyncio.Runner(loop_factory=lambda: AppEventLoop(app)) as runner:
        loop = runner.get_loop()
        task = loop.create_task(run_app(app, sentinel=sentinel, **kwargs))
        waker, previous = _install_signals(loop, app, sentinel)
        try:
            while not task.done():
                try:
                    runner.run(wait(task))
                except RuntimeError as exc:
                    if task.done():
                        break
                    if "stopped before Future completed" not in str(exc):
                        raise
                    log.info("Qt's event loop was quit; finishing the shutdown")
                    loop.call_soon(sentinel.request)
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            waker.stop()
            waker.deleteLater()
        return task.result()


def _install_signals(loop: asyncio.AbstractEventLoop, app: QApplication,
                     sentinel: QuitSentinel) -> tuple[QTimer, dict[int, Any]]:
    """Ctrl+C in the terminal quits like any outside quit (see about_to_quit); SIGTERM and SIGHUP
    quit as Ctrl+Q does (the sentinel: the window's state saved, the workers shut down in order,
    so their KV is written to disk), where they would have ended the process at once. Python runs
    a handler on the main thread only when the interpreter gets control, which Qt's C++ loop does
    not give while idle: a slow timer hands it over."""
    waker = QTimer(app)
    waker.timeout.connect(lambda: None)
    waker.start(250)

    def quit_on(signum: int, _frame: Any) -> None:
        loop.call_soon_threadsafe(_quit_on_signal, sentinel, signum)

    previous = {signal.SIGINT: signal.signal(signal.SIGINT, lambda *_: loop.call_soon_threadsafe(app.quit))}
    for signum in quit_signals():
        previous[signum] = signal.signal(signum, quit_on)
    return waker, previous


def _quit_on_signal(sentinel: QuitSentinel, signum: int) -> None:
    log.info("%s received: quitting as Ctrl+Q does", signal.Signals(signum).name)
    sentinel.request()


def main_gui(argv: list[str] | None = None) -> int:
    """Start the desktop app (the `omnidesk` command with no subcommand, `omnidesk-gui`)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    path = setup_logging()
    log.info("Omnidesk %s starting (log: %s)", __version__, path)
    problem = platform_problem()  # Qt would abort in QApplication() without a word in the log
    if problem:
        return log_failure(problem)
    instance = SingleInstance(config_dir())  # one window per user: a second launch raises the first
    if not instance.acquire():
        return second_launch(instance)
    previous = route_qt_messages()
    try:
        # argv[0] names the X11 window class instance (WM_CLASS): "omnidesk", not "__main__.py"
        app = QApplication.instance() or QApplication(["omnidesk", *(argv or [])])
        configure_app(app)
        instance.listen()
        return serve(app)
    except Exception as exc:  # noqa: BLE001 - the user gets a sentence, the log the traceback
        return log_failure(f"Omnidesk stopped on an unexpected error: {type(exc).__name__}: {exc}", exc)
    finally:
        qInstallMessageHandler(previous)
        instance.release()
