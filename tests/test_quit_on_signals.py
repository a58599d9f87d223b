"""Issue 22: SIGTERM and SIGHUP (a logout, a system shutdown, `kill`) quit the app as Ctrl+Q
does (window state saved, workers shut down in order, so their KV reaches the disk), where the
process used to die at once with status -15."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from desktop.app import QuitSentinel, _quit_on_signal, quit_signals

ROOT = Path(__file__).resolve().parents[1]


def _wait_for(what: str, check, app: subprocess.Popen, errors: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if app.poll() is not None:
            pytest.fail(f"the app exited ({app.returncode}) before {what}:\n{errors.read_text(errors='replace')}")
        time.sleep(0.2)
    pytest.fail(f"no {what} after {timeout:.0f} s:\n{errors.read_text(errors='replace')}")


@pytest.mark.skipif(not hasattr(signal, "SIGTERM") or sys.platform == "win32", reason="POSIX signals")
@pytest.mark.timeout(240)
def test_sigterm_quits_the_real_app_as_ctrl_q_does(tmp_path):
    dirs = {name: tmp_path / name.lower() for name in ("CONFIG", "DATA", "LOG", "CACHE")}
    for path in dirs.values():
        path.mkdir()
    settings_file = dirs["CONFIG"] / "settings.json"
    settings_file.write_text(json.dumps({"model_source": "tiny"}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMNIDESK_")}
    env.update({f"OMNIDESK_{name}_DIR": str(path) for name, path in dirs.items()},
               QT_QPA_PLATFORM="offscreen", HF_HUB_OFFLINE="1")
    log_file = dirs["LOG"] / "omnidesk.log"
    errors = tmp_path / "app.stderr"
    with errors.open("wb") as err:
        app = subprocess.Popen([sys.executable, "-m", "desktop"], cwd=ROOT, env=env,
                               stdin=subprocess.DEVNULL, stdout=err, stderr=err)
    try:
        _wait_for("model ready", lambda: log_file.exists() and "Model omnidesk-tiny ready" in log_file.read_text(),
                  app, errors, 120)
        app.send_signal(signal.SIGTERM)
        assert app.wait(60) == 0, errors.read_text(errors="replace")
    finally:
        if app.poll() is None:
            app.kill()
            app.wait(10)
    text = log_file.read_text()
    assert "SIGTERM received: quitting as Ctrl+Q does" in text and "Shutting down" in text, text
    assert "Traceback" not in text and " ERROR " not in text, text
    saved = json.loads(settings_file.read_text())  # the window's state was saved on the way out, as Ctrl+Q saves it
    assert saved["model_source"] == "tiny" and saved.get("window_geometry"), saved


def test_the_quit_signals_are_sigterm_and_sighup_where_they_exist():
    names = {s.name for s in quit_signals()}
    assert "SIGTERM" in names
    assert ("SIGHUP" in names) == hasattr(signal, "SIGHUP")


def test_a_signal_resolves_the_sentinel_even_before_the_loop_waits_on_it():
    loop = asyncio.new_event_loop()
    try:
        early = QuitSentinel()
        _quit_on_signal(early, signal.SIGTERM)  # at start, before run_app binds it
        assert early.bind(loop).done()
        late = QuitSentinel()
        future = late.bind(loop)
        assert not future.done()
        _quit_on_signal(late, quit_signals()[-1])
        assert future.done()
    finally:
        loop.close()
