"""The admin panel with a remote worker (a real llama.cpp server on 127.0.0.1, marked real_model):
it is listed beside the local worker with its kind and URL, serves a conversation whose second
turn reads from the server's cache, shows "unreachable" with the reason once the server dies, and
is gone from the tables once it is removed in Settings (no restart)."""

from __future__ import annotations

import asyncio
import time

import pytest

from desktop import composition
from desktop.composition import Composition
from desktop.model.messages import Message
from desktop.model.params import SamplingParams
from desktop.protocol import Done
from desktop.settings import Settings
from desktop.workers import factory
from desktop.workers.remote.llama_server import LlamaServer

pytestmark = pytest.mark.real_model


def cells(view, row: int) -> list[str]:
    model = view.model()
    return [model.data(model.index(row, c)) for c in range(model.columnCount())]


def test_admin_lists_a_remote_worker_and_shows_it_unreachable(tmp_path, monkeypatch, qapp, aloop, qtbot, screenshot):
    for name in ("CONFIG", "DATA", "LOG"):
        monkeypatch.setenv(f"OMNIDESK_{name}_DIR", str(tmp_path / name.lower()))
    monkeypatch.setattr(composition, "remote_hosts",
                        lambda specs, ids=None: factory.remote_hosts(specs, ids, health_s=0.3, backoff=(0.1, 0.4), timeout_s=2.0))
    server = LlamaServer(ctx=512, slots=2, threads=1)
    server.start()
    c = Composition(qapp, Settings(model_source="tiny", slots_per_worker=1, remote_workers=[{"url": server.url}]),
                    settings_path=tmp_path / "settings.json")
    try:
        c.start()
        assert aloop.run(c.wait_ready(60))
        qtbot.waitExposed(c.window)
        c.window.show_page("admin")
        panel = c.window.admin

        async def conversation() -> list[Done]:
            async def turn(msgs):
                events = [e async for e in c.proxy.chat(msgs, SamplingParams(max_tokens=6, temperature=0.0))]
                assert isinstance(events[-1], Done), events[-1]
                return events[-1]
            # a new conversation goes where most slots are free: the server's two, not the local one
            msgs = [Message("system", "You are brief."), Message("user", "Name a fruit.")]
            first = await turn(msgs)
            second = await turn(msgs + [Message("assistant", first.text), Message("user", "Another one?")])
            return [first, second]

        first, second = aloop.run(conversation(), 60)
        assert second.stats.cached_tokens > 0 and second.stats.kind == "extend"
        c.window.refresh()
        rows = {cells(panel.workers_view, r)[0]: cells(panel.workers_view, r) for r in range(panel.workers.rowCount())}
        assert set(rows) == {"cpu0", "remote0"}
        remote = rows["remote0"]
        assert remote[1] == "idle" and remote[2] == f"remote · {server.url}" and remote[4] == "0 / 2"
        slots = [cells(panel.slots_view, r) for r in range(panel.slots.rowCount())]
        assert any(r[0] == "remote0" and r[2] == "idle" and int(r[4]) >= 4 and r[6] == "—" for r in slots), slots
        c.window.resize(1100, 720)
        screenshot(c.window, "admin_remote_worker")

        server.kill()
        end = time.monotonic() + 15
        while True:
            c.window.refresh()
            remote = {cells(panel.workers_view, r)[0]: cells(panel.workers_view, r) for r in range(panel.workers.rowCount())}["remote0"]
            if remote[1] == "unreachable" or time.monotonic() > end:
                break
            aloop.run(asyncio.sleep(0.1))
        assert remote[1] == "unreachable" and remote[6].startswith("unreachable:") and server.url in remote[6]
        slots = [cells(panel.slots_view, r) for r in range(panel.slots.rowCount()) if cells(panel.slots_view, r)[0] == "remote0"]
        assert not slots, slots  # its cache is gone with it: the table lists only slots that hold something
        gone = [s for s in c.snapshot().slots if s.worker == "remote0"]
        assert gone and all(s.state == "empty" and not s.hash_prefix for s in gone), gone
        assert c.window.status.workers_label.text() == "2 workers: 1 idle, 1 unreachable"
        qapp.processEvents()  # let the status bar make room for the longer text
        screenshot(c.window, "admin_remote_unreachable")

        gateway = c.gateway  # removed in Settings: it leaves the running engine, no reload
        assert aloop.run(c.apply_settings(c.settings.model_copy(update={"remote_workers": []}))) is False
        c.window.refresh()
        assert c.gateway is gateway and [cells(panel.workers_view, r)[0] for r in range(panel.workers.rowCount())] == ["cpu0"]
        assert {cells(panel.slots_view, r)[0] for r in range(panel.slots.rowCount())} <= {"cpu0"}
        assert {s.worker for s in c.snapshot().slots} == {"cpu0"}
        assert c.window.status.workers_label.text() == "1 worker: idle"
    finally:
        aloop.run(c.shutdown(), 30)
        server.kill()
