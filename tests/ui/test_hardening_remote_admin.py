"""Issue 19, item 6, as the user sees it: a remote server of the wrong kind (its /v1/models says
"data": 5) no longer keeps the app "Connecting…" forever; the engine is ready with the local
worker, and Admin lists the remote one as an error whose text says it is unusable and why."""

from __future__ import annotations

import asyncio
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from desktop import composition
from desktop.composition import Composition
from desktop.settings import Settings
from desktop.workers import factory

pytestmark = pytest.mark.hardening


class WrongKind(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        body = {"/health": b'{"status":"ok"}', "/v1/models": b'{"data": 5}'}.get(self.path)
        self.send_response(200 if body else 404)
        body = body or b"{}"
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def cells(view, row: int) -> list[str]:
    model = view.model()
    return [model.data(model.index(row, c)) for c in range(model.columnCount())]


def test_admin_shows_a_wrong_kind_of_server_as_unusable_with_the_reason(tmp_path, monkeypatch, qapp, aloop, qtbot,
                                                                        screenshot):
    for name in ("CONFIG", "DATA", "LOG"):
        monkeypatch.setenv(f"OMNIDESK_{name}_DIR", str(tmp_path / name.lower()))
    monkeypatch.setattr(composition, "remote_hosts",
                        lambda specs, ids=None: factory.remote_hosts(specs, ids, health_s=0.3, backoff=(0.1, 0.4), timeout_s=2.0))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), WrongKind)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    c = Composition(qapp, Settings(model_source="tiny", slots_per_worker=1, remote_workers=[{"url": url}]),
                    settings_path=tmp_path / "settings.json")
    try:
        c.start()
        assert aloop.run(c.wait_ready(60))  # not "Connecting…" for ever
        qtbot.waitExposed(c.window)
        c.window.show_page("admin")
        panel = c.window.admin
        end = time.monotonic() + 15
        while True:
            c.window.refresh()
            rows = {cells(panel.workers_view, r)[0]: cells(panel.workers_view, r) for r in range(panel.workers.rowCount())}
            if rows.get("remote0", [None, ""])[1] == "error" or time.monotonic() > end:
                break
            aloop.run(asyncio.sleep(0.1))
        remote = rows["remote0"]
        assert remote[1] == "error" and remote[6].startswith("unusable:"), remote
        assert url in remote[6] and "no list of models" in remote[6], remote[6]
        assert rows["cpu0"][1] in ("idle", "busy")
        c.window.resize(1100, 720)
        screenshot(c.window, "admin_remote_unusable")
    finally:
        aloop.run(c.shutdown(), 30)
        httpd.shutdown()
