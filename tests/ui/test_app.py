"""App shell tests (offscreen, tiny model): the app starts and shuts down cleanly twice in a row,
Qt quitting from outside (aboutToQuit, twice) is harmless, a corrupt settings file is reported
once, the exception hook logs and shows a dialog, and `omnidesk` picks the window or the terminal."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import threading

import pytest
import qasync
from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtWidgets import QMessageBox

import desktop.app as app_module
from desktop import cli
from desktop.logs import flush_logs, log_path, setup_logging
from desktop.settings import Settings, save_settings, settings_path
from desktop.ui.excepthook import ExceptionHook


@pytest.fixture
def env(tmp_path, monkeypatch):
    for name in ("CONFIG", "DATA", "LOG"):
        monkeypatch.setenv(f"OMNIDESK_{name}_DIR", str(tmp_path / name.lower()))
    setup_logging()
    yield tmp_path
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, "_omnidesk_handler", False)]:
        root.removeHandler(handler)
        handler.close()


def log_text() -> str:
    flush_logs()
    return log_path().read_text(encoding="utf-8") if log_path().exists() else ""


def worker_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("worker-") and t.is_alive()]


def test_app_starts_and_shuts_down_cleanly_twice(env, qapp):
    save_settings(Settings(model_source="tiny"))
    app_module.configure_app(qapp)
    states: list[str] = []

    def quit_from_outside(comp) -> None:
        def ready(state: str) -> None:
            states.append(state)
            if state == "ready":  # like a session logout: Qt quits, aboutToQuit fires (twice here)
                QTimer.singleShot(0, qapp.quit)
                QTimer.singleShot(0, qapp.quit)
        comp.engine_state.connect(ready)

    assert app_module.serve(qapp, exit_when_ready=True) == 0
    assert app_module.serve(qapp, started=quit_from_outside) == 0
    assert states == ["loading", "ready", "closed"]
    text = log_text()
    assert text.count("Model omnidesk-tiny ready") == 2 and text.count("Shutting down") == 2
    assert text.count("finishing the shutdown") == 1  # the outside quit: serve() resumed the loop
    assert "Uncaught" not in text and " ERROR " not in text, text
    assert worker_threads() == []  # the gateway closed its hosts
    saved = json.loads(settings_path().read_text())
    assert saved["model_source"] == "tiny" and saved["window_geometry"]
    assert sys.excepthook is not None and not isinstance(getattr(sys.excepthook, "__self__", None), ExceptionHook)


def test_ctrl_c_in_the_terminal_quits_cleanly(env, qapp):
    save_settings(Settings(model_source="tiny"))
    app_module.configure_app(qapp)

    def interrupt_when_ready(comp) -> None:
        comp.engine_state.connect(lambda state: state == "ready" and QTimer.singleShot(
            0, lambda: os.kill(os.getpid(), signal.SIGINT)))

    before = signal.getsignal(signal.SIGINT)
    assert app_module.serve(qapp, started=interrupt_when_ready) == 0
    assert signal.getsignal(signal.SIGINT) is before
    text = log_text()
    assert "Shutting down" in text and "Uncaught" not in text and worker_threads() == []


def test_main_gui_runs_the_app(env, qapp, monkeypatch):
    save_settings(Settings(model_source="tiny"))
    real_serve = app_module.serve
    monkeypatch.setattr(app_module, "serve", lambda app: real_serve(app, exit_when_ready=True))
    assert cli.main_gui() == 0
    assert "Omnidesk 0" in log_text() and worker_threads() == []


def test_corrupt_settings_are_reported_once(env, qapp):
    path = settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"model_source": "tiny", "workers": "many"', encoding="utf-8")
    seen: list[list[str]] = []

    def started(comp) -> None:
        boxes = [b for b in comp.window.findChildren(QMessageBox) if b.isVisible()]
        seen.append([b.text() for b in boxes])
        for b in boxes:
            assert b.windowModality() != Qt.WindowModality.ApplicationModal
        comp.settings = Settings(model_source="tiny")  # the defaults would load the real model

    assert app_module.serve(qapp, exit_when_ready=True, started=started) == 0
    assert len(seen[0]) == 1 and "could not be read" in seen[0][0]
    assert list(path.parent.glob("settings.bad-*.json"))
    assert app_module.serve(qapp, exit_when_ready=True, started=started) == 0
    assert seen[1] == []  # a good file was saved at close: no second warning


class Emitter(QObject):
    text = Signal(str)


def test_exception_hook_logs_and_shows_a_dialog(env, qtbot, aloop):
    hook = ExceptionHook()
    hook.install(aloop)
    try:
        try:
            raise ValueError("boom")
        except ValueError:
            sys.excepthook(*sys.exc_info())
        qtbot.waitUntil(lambda: hook.dialog is not None and hook.dialog.isVisible(), timeout=2000)
        dialog = hook.dialog
        assert dialog.windowModality() == Qt.WindowModality.NonModal
        assert dialog.text() == "An unexpected error occurred: ValueError: boom"
        assert "Traceback" in dialog.detailedText() and str(log_path()) in dialog.informativeText()
        text = log_text()
        assert "Uncaught exception" in text and "Traceback" in text and "ValueError: boom" in text

        def bad_slot() -> None:
            raise KeyError("from a slot")

        @qasync.asyncSlot(str)
        async def bad_async_slot(text: str) -> None:
            raise RuntimeError(text)

        emitter = Emitter()
        emitter.text.connect(bad_async_slot)
        QTimer.singleShot(0, bad_slot)
        threading.Thread(target=lambda: 1 / 0, name="doomed").start()
        emitter.text.emit("from an async slot")
        aloop.run(asyncio.sleep(0.2))
        qtbot.waitUntil(lambda: hook.count == 4, timeout=3000)
        assert hook.dialog is dialog  # later errors are counted in the open dialog, not stacked
        qtbot.waitUntil(lambda: "3 more errors" in dialog.informativeText(), timeout=2000)
        text = log_text()
        assert "KeyError: 'from a slot'" in text and "ZeroDivisionError" in text and "from an async slot" in text
        dialog.close()
        qtbot.waitUntil(lambda: hook.dialog is None, timeout=2000)
    finally:
        hook.uninstall()
    assert aloop.run(asyncio.sleep(0, result="still running")) == "still running"


def test_cli_opens_the_window_or_falls_back_to_the_terminal(monkeypatch, capsys):
    calls: list[str] = []
    monkeypatch.setattr(app_module, "main_gui", lambda: calls.append("gui") or 0)
    monkeypatch.setattr(cli, "_chat", lambda args: calls.append(f"chat:{args.model}") or 0)
    monkeypatch.setattr(sys, "platform", "linux")
    for name in ("QT_QPA_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY"):
        monkeypatch.delenv(name, raising=False)
    assert cli.main([]) == 0 and calls == ["chat:default"]
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no display found" in err and "terminal chat" in err
    monkeypatch.setenv("WAYLAND_DISPLAY", "wayland-0")
    assert cli.main([]) == 0 and cli.main(["gui"]) == 0 and calls[-2:] == ["gui", "gui"]
    assert cli.main(["chat", "--model", "tiny"]) == 0 and calls[-1] == "chat:tiny"
    capsys.readouterr()
    assert cli.main(["--model", "tiny"]) == 0 and calls[-1] == "gui"
    assert "--model only apply to the terminal chat" in capsys.readouterr().err
    monkeypatch.delenv("WAYLAND_DISPLAY")
    monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")
    assert cli.main([]) == 0 and calls[-1] == "gui"
