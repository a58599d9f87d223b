"""A remote server that is not there (a closed port, no llama.cpp needed): its one status stays true
while the wait between checks grows, a warning says so once in the log, and the health checks of a
live server leave no line of httpx's in the app's log file."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from desktop.logs import flush_logs, log_path, setup_logging
from desktop.protocol import WorkerState, WorkerStatus
from desktop.workers.remote.host import UNREACHABLE, RemoteHost
from desktop.workers.remote.probe import check_health
from desktop.workers.remote.spec import RemoteSpec


@pytest.fixture
def closed_url():
    """A port bound here and never listened on: connections to it are refused, and no server of
    another test can take it meanwhile (a freed port was once taken, and the 'server' came up)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{s.getsockname()[1]}"


def test_an_unreachable_server_says_how_often_it_is_checked_truly_and_warns_once(caplog, closed_url):
    url = closed_url
    seen: list = []
    caplog.set_level(logging.WARNING, logger="desktop.workers.remote.host")
    host = RemoteHost("r0", RemoteSpec(url), backoff=(0.05, 0.4), timeout_s=1.0)
    host.start(lambda _w, e: seen.append(e))
    try:
        time.sleep(1.2)  # checks after 0.05, 0.1, 0.2, 0.4, 0.4 s: the wait grew to its longest
    finally:
        host.close()
    down = [e for e in seen if isinstance(e, WorkerStatus) and e.state is WorkerState.ERROR]
    assert len(down) == 1 and down[0].code == UNREACHABLE  # reported once, not on every check
    assert down[0].message.endswith("checking again at least every 0.4 s")
    # (a host another test left closing may log meanwhile: only this server's lines count)
    warnings = [r.getMessage() for r in caplog.records if r.name == "desktop.workers.remote.host" and url in r.getMessage()]
    assert len(warnings) == 1 and "does not answer" in warnings[0], warnings


class Healthy(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "15")
        self.end_headers()
        self.wfile.write(b'{"status":"ok"}')

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def log_file(tmp_path, monkeypatch):
    monkeypatch.setenv("OMNIDESK_LOG_DIR", str(tmp_path / "log"))
    levels = {n: logging.getLogger(n).level for n in ("httpx", "httpcore", "")}
    setup_logging()
    yield lambda: (flush_logs(), log_path().read_text(encoding="utf-8"))[1]
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, "_omnidesk_handler", False)]:
        root.removeHandler(handler)
        handler.close()
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


def test_a_health_check_leaves_no_line_in_the_log(log_file):
    server = ThreadingHTTPServer(("127.0.0.1", 0), Healthy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    spec = RemoteSpec(f"http://127.0.0.1:{server.server_address[1]}")

    async def check() -> None:
        async with httpx.AsyncClient(trust_env=False) as client:
            for _ in range(3):
                await check_health(client, spec)

    try:
        asyncio.run(check())
    finally:
        server.shutdown()
        server.server_close()
    logging.getLogger("desktop.workers.remote.host").info("after the checks")  # the app's own INFO lines stay
    text = log_file()
    assert "after the checks" in text
    assert "HTTP Request" not in text and "/health" not in text, text
