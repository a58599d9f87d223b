"""Issue 8, set-up: the X11 window opens for real under Xvfb (window mapped, screenshot, clean exit),
the xcb plugin's missing libraries are derived from `ldd` and named with their Debian packages, and
a start that cannot open the window says why on the terminal and in the log file."""

from __future__ import annotations

import ctypes
import json
import logging
import os
import re
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import desktop.app as app_module
from desktop import qtdeps
from desktop.logs import flush_logs, log_path

pytestmark = pytest.mark.hardening
ROOT = Path(__file__).resolve().parents[1]
SHOT = ("import sys; from PySide6.QtGui import QGuiApplication; app = QGuiApplication(sys.argv[:1]); "
        "sys.exit(0 if app.primaryScreen().grabWindow(0).save(sys.argv[1]) else 1)")


# ------------------------------------------------------------------ deriving the libraries


def test_debian_names_follow_the_naming_rule():
    assert qtdeps.debian_candidates("libxcb-icccm.so.4")[0] == "libxcb-icccm4"
    assert qtdeps.debian_candidates("libxcb-keysyms.so.1")[0] == "libxcb-keysyms1"
    assert qtdeps.debian_candidates("libxkbcommon-x11.so.0")[0] == "libxkbcommon-x11-0"
    assert qtdeps.debian_candidates("libX11-xcb.so.1")[0] == "libx11-xcb1"
    assert qtdeps.debian_candidates("libgcc_s.so.1")[0] == "libgcc-s1"
    assert "libxcb-cursor0t64" in qtdeps.debian_candidates("libxcb-cursor.so.0")  # Debian 13 names
    assert qtdeps.debian_candidates("libglib-2.0.so.0")[0] == "libglib2.0-0"
    assert qtdeps.debian_candidates("not-a-soname") == []


def test_missing_libraries_come_from_ldd(monkeypatch, tmp_path):
    out = ("\tlinux-vdso.so.1 (0x00007ffd)\n\tlibxcb-icccm.so.4 => not found\n"
           "\tlibxcb.so.1 => /lib/x86_64-linux-gnu/libxcb.so.1 (0x00007f)\n"
           "\tlibxcb-keysyms.so.1 => not found\n\tlibxcb-icccm.so.4 => not found\n")
    calls: list[list[str]] = []
    monkeypatch.setattr(qtdeps.subprocess, "run", lambda cmd, **kw: calls.append(cmd) or
                        subprocess.CompletedProcess(cmd, 0, out, ""))
    assert qtdeps.missing_libs([tmp_path / "libqxcb.so"]) == ["libxcb-icccm.so.4", "libxcb-keysyms.so.1"]
    assert calls[0][0].endswith("ldd") and calls[0][1].endswith("libqxcb.so")


def test_packages_are_checked_with_apt_and_unknown_sonames_are_named(capsys, monkeypatch):
    known = {"libxcb-icccm4", "libxcb-cursor0t64"}  # as on Debian 13: only the t64 name exists
    packages, unresolved = qtdeps.debian_packages(
        ["libxcb-icccm.so.4", "libxcb-cursor.so.0", "libnothing.so.7"], known=lambda names: known & set(names))
    assert packages == ["libxcb-icccm4", "libxcb-cursor0t64"] and unresolved == ["libnothing.so.7"]
    guessed, unresolved = qtdeps.debian_packages(["libnothing.so.7"], guess=True, known=lambda names: set())
    assert guessed == ["libnothing7"] and unresolved == []
    monkeypatch.setattr(qtdeps, "missing_libs", lambda paths: ["libnothing.so.7"])
    monkeypatch.setattr(qtdeps, "apt_known", lambda names: set())
    assert qtdeps.main(["packages"]) == 3
    assert "no Debian package found for libnothing.so.7" in capsys.readouterr().err


def test_the_real_plugin_is_found_and_checked():
    plugins = qtdeps.xcb_plugins()
    assert plugins and plugins[0].name == "libqxcb.so" and plugins[0].exists()
    assert isinstance(qtdeps.missing_libs(plugins), list)


@pytest.mark.parametrize(("env", "expected"), [
    ({"DISPLAY": ":0"}, True),
    ({}, False),
    ({"DISPLAY": ":0", "QT_QPA_PLATFORM": "offscreen"}, False),
    ({"DISPLAY": ":0", "QT_QPA_PLATFORM": "xcb"}, True),
    ({"DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0", "XDG_SESSION_TYPE": "wayland"}, False),
])
def test_xcb_is_checked_only_when_qt_would_use_it(env, expected):
    assert qtdeps.uses_xcb(env) is (expected and sys.platform.startswith("linux"))


# ------------------------------------------------------------------ a failed start is explained


@pytest.fixture
def logs(tmp_path, monkeypatch):
    """main_gui sets logging up (to stderr as captured now) in a fresh folder; read that file."""
    monkeypatch.setenv("OMNIDESK_LOG_DIR", str(tmp_path / "log"))
    yield lambda: (flush_logs(), log_path().read_text(encoding="utf-8"))[1]
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, "_omnidesk_handler", False)]:
        root.removeHandler(handler)
        handler.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the xcb plugin is Linux's")
def test_missing_xcb_libraries_stop_the_start_with_the_command_in_the_log(capsys, logs, monkeypatch):
    monkeypatch.delenv("QT_QPA_PLATFORM", raising=False)
    monkeypatch.setenv("DISPLAY", ":0")
    monkeypatch.setattr(qtdeps, "missing_libs", lambda paths: ["libxcb-icccm.so.4", "libxcb-keysyms.so.1"])
    monkeypatch.setattr(qtdeps, "apt_known", lambda names: {"libxcb-icccm4", "libxcb-keysyms1"})

    class NoQt:  # a real QApplication on xcb without its libraries aborts the test run
        instance = staticmethod(lambda: None)

        def __init__(self, *args) -> None:
            pytest.fail("Qt must not start")

    monkeypatch.setattr(app_module, "QApplication", NoQt)
    assert app_module.main_gui() == 1
    text, err = logs(), capsys.readouterr().err
    for where in (text, err):
        assert "libxcb-icccm.so.4, libxcb-keysyms.so.1" in where
        assert "apt-get install libxcb-icccm4 libxcb-keysyms1" in where
    assert str(log_path()) in err


def test_an_exception_at_start_is_a_sentence_and_a_logged_traceback(capsys, logs, monkeypatch, qapp):
    monkeypatch.setattr(app_module, "platform_problem", lambda: None)

    def broken(app):
        raise RuntimeError("the composition could not be built")

    monkeypatch.setattr(app_module, "serve", broken)
    assert app_module.main_gui() == 1
    text, err = logs(), capsys.readouterr().err
    assert "RuntimeError: the composition could not be built" in err and "Traceback" not in err
    assert "Traceback" in text and "the composition could not be built" in text


def test_a_missing_system_library_at_import_is_a_sentence(tmp_path):
    fake = tmp_path / "site" / "PySide6"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text('raise ImportError("libEGL.so.1: cannot open shared object file: '
                                      'No such file or directory")')
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"), OMNIDESK_LOG_DIR=str(tmp_path / "log"),
               QT_QPA_PLATFORM="offscreen")
    run = subprocess.run([sys.executable, "-m", "desktop"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
    assert "libEGL.so.1" in run.stderr and "install the missing system packages" in run.stderr
    text = (tmp_path / "log" / "omnidesk.log").read_text()
    assert "libEGL.so.1" in text and "Traceback" in text


# ------------------------------------------------------------------ the real window under Xvfb


def _need(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if not missing:
        return
    reason = (f"{', '.join(missing)} not found (Debian: apt-get install xvfb x11-utils; "
              "`./omnidesk test` run as root installs them)")
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{reason}: under CI the real window must be tested")
    pytest.skip(reason)


@pytest.fixture
def xvfb(tmp_path):
    """A fresh Xvfb on a display number it picks itself (-displayfd): no clash with other servers."""
    _need("Xvfb", "xwininfo")
    read_end, write_end = os.pipe()
    log = (tmp_path / "xvfb.log").open("wb")
    server = subprocess.Popen(["Xvfb", "-displayfd", str(write_end), "-screen", "0", "1280x800x24",
                               "-nolisten", "tcp"], pass_fds=(write_end,), stdout=log, stderr=log)
    os.close(write_end)
    try:
        ready, _, _ = select.select([read_end], [], [], 20)
        number = os.read(read_end, 32).decode().strip() if ready else ""
        assert number.isdigit(), f"Xvfb did not start: {(tmp_path / 'xvfb.log').read_text(errors='replace')}"
        yield f":{number}"
    finally:
        os.close(read_end)
        server.terminate()
        server.wait(10)
        log.close()


def _top_windows(display: str) -> list[tuple[str, str]]:
    tree = subprocess.run(["xwininfo", "-display", display, "-root", "-children"],
                          capture_output=True, text=True, timeout=10).stdout
    return re.findall(r'^\s+(0x[0-9a-f]+) "([^"]*)"', tree, re.MULTILINE)


def _viewable(display: str, window: str) -> bool:
    info = subprocess.run(["xwininfo", "-display", display, "-id", window],
                          capture_output=True, text=True, timeout=10).stdout
    size = re.search(r"Width: (\d+)\s+Height: (\d+)", info)
    return "IsViewable" in info and size is not None and min(map(int, size.groups())) >= 200


def _close_window(display: str, window: str) -> None:
    """What a window manager's close button does: send WM_DELETE_WINDOW to the window."""
    x11 = ctypes.CDLL("libX11.so.6")
    x11.XOpenDisplay.restype = ctypes.c_void_p
    x11.XOpenDisplay.argtypes = [ctypes.c_char_p]
    x11.XInternAtom.restype = ctypes.c_ulong
    x11.XInternAtom.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    x11.XSendEvent.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int, ctypes.c_long, ctypes.c_void_p]
    x11.XFlush.argtypes = x11.XCloseDisplay.argtypes = [ctypes.c_void_p]

    class ClientMessage(ctypes.Structure):
        _fields_ = [("type", ctypes.c_int), ("serial", ctypes.c_ulong), ("send_event", ctypes.c_int),
                    ("display", ctypes.c_void_p), ("window", ctypes.c_ulong), ("message_type", ctypes.c_ulong),
                    ("format", ctypes.c_int), ("data", ctypes.c_long * 5)]

    class Event(ctypes.Union):
        _fields_ = [("xclient", ClientMessage), ("pad", ctypes.c_long * 24)]

    dpy = x11.XOpenDisplay(display.encode())
    assert dpy, f"cannot open X display {display}"
    event = Event()
    event.xclient.type, event.xclient.format = 33, 32  # ClientMessage, 32-bit data
    event.xclient.window = int(window, 16)
    event.xclient.message_type = x11.XInternAtom(dpy, b"WM_PROTOCOLS", 0)
    event.xclient.data[0] = x11.XInternAtom(dpy, b"WM_DELETE_WINDOW", 0)
    x11.XSendEvent(dpy, int(window, 16), 0, 0, ctypes.byref(event))
    x11.XFlush(dpy)
    x11.XCloseDisplay(dpy)


def _wait(what: str, check, app: subprocess.Popen, errors: Path, timeout: float):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        if app.poll() is not None:
            pytest.fail(f"the app exited ({app.returncode}) before {what}:\n{errors.read_text(errors='replace')}")
        time.sleep(0.2)
    pytest.fail(f"no {what} after {timeout:.0f} s:\n{errors.read_text(errors='replace')}")


@pytest.mark.timeout(240)
def test_the_real_window_opens_on_x11_and_closes_cleanly(xvfb, tmp_path):
    home = tmp_path / "home"
    dirs = {name: home / sub for name, sub in (("XDG_CONFIG_HOME", ".config"), ("XDG_DATA_HOME", ".local/share"),
            ("XDG_CACHE_HOME", ".cache"), ("XDG_STATE_HOME", ".local/state"), ("XDG_RUNTIME_DIR", "run"),
            ("TMPDIR", "tmp"))}
    for path in dirs.values():
        path.mkdir(parents=True, mode=0o700)
    (dirs["XDG_CONFIG_HOME"] / "omnidesk").mkdir()
    (dirs["XDG_CONFIG_HOME"] / "omnidesk" / "settings.json").write_text(json.dumps({"model_source": "tiny"}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("QT_", "OMNIDESK_", "XDG_", "WAYLAND"))}
    env.update({k: str(v) for k, v in dirs.items()}, HOME=str(home), DISPLAY=xvfb, HF_HUB_OFFLINE="1")
    log_file = dirs["XDG_STATE_HOME"] / "omnidesk" / "log" / "omnidesk.log"
    errors = tmp_path / "app.stderr"
    with errors.open("wb") as err:
        app = subprocess.Popen([sys.executable, "-m", "desktop"], cwd=ROOT, env=env,
                               stdin=subprocess.DEVNULL, stdout=err, stderr=err)
    try:
        window = _wait("mapped Omnidesk window", lambda: next(
            (w for w, name in _top_windows(xvfb) if "Omnidesk" in name and _viewable(xvfb, w)), None),
            app, errors, 90)
        _wait("model ready", lambda: log_file.exists() and "Model omnidesk-tiny ready" in log_file.read_text(),
              app, errors, 90)
        time.sleep(1.0)  # let the ready state paint
        shot = ROOT / "test-artifacts" / "x11-real-window.png"
        shot.parent.mkdir(exist_ok=True)
        grab_env = dict(env, QT_QPA_PLATFORM="xcb")
        subprocess.run([sys.executable, "-c", SHOT, str(shot)], env=grab_env, check=True, timeout=60)
        from PySide6.QtGui import QImage

        image = QImage(str(shot))
        colours = {image.pixel(x, y) for x in range(0, image.width(), 16) for y in range(0, image.height(), 16)}
        assert image.width() == 1280 and len(colours) > 8, "the screenshot shows no window"
        _close_window(xvfb, window)
        assert app.wait(60) == 0, errors.read_text(errors="replace")
    finally:
        if app.poll() is None:
            app.kill()
            app.wait(10)
    stderr, text = errors.read_text(errors="replace"), log_file.read_text()
    assert "Traceback" not in stderr and "Traceback" not in text, stderr + text
    assert "Shutting down" in text and " CRITICAL " not in text and " ERROR " not in text, text
