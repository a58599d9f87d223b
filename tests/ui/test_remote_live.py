"""Remote workers added or removed in Settings join or leave the running engine (offscreen, tiny
model, a server address nobody answers on): no reload, the same gateway and local worker, a local
conversation's next turn still hits its cache, Admin and the status bar show the change; a server
added in the dialog and applied shows up with no "Restarting the model" page."""

from __future__ import annotations

import asyncio
import json
import socket
import time

import pytest

from desktop import composition
from desktop.composition import Composition
from desktop.model.messages import Message
from desktop.model.params import SamplingParams
from desktop.protocol import Done, PrefillDone
from desktop.settings import Settings
from desktop.workers import factory


@pytest.fixture
def env(tmp_path, monkeypatch):
    for name in ("CONFIG", "DATA", "LOG"):
        monkeypatch.setenv(f"OMNIDESK_{name}_DIR", str(tmp_path / name.lower()))
    monkeypatch.setattr(composition, "remote_hosts", lambda specs, ids=None: factory.remote_hosts(
        specs, ids, health_s=0.3, backoff=(0.1, 0.4), timeout_s=1.0))
    return tmp_path


def closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def with_remotes(settings: Settings, *urls: str, **more: object) -> Settings:
    return Settings.model_validate({**settings.model_dump(), "remote_workers": [{"url": u} for u in urls], **more})


def rows(comp: Composition) -> dict[str, list[str]]:
    comp.window.refresh()
    model = comp.window.admin.workers
    return {model.data(model.index(r, 0)): [model.data(model.index(r, c)) for c in range(model.columnCount())]
            for r in range(model.rowCount())}


def test_remote_workers_join_and_leave_without_a_reload(env, qapp, aloop, qtbot, screenshot):
    comp = Composition(qapp, Settings(model_source="tiny", slots_per_worker=2), settings_path=env / "config" / "settings.json")
    comp.start()
    try:
        assert aloop.run(comp.wait_ready(60))
        qtbot.waitExposed(comp.window)
        comp.window.show_page("admin")
        gateway, local, states = comp.gateway, comp.hosts[0], []
        comp.engine_state.connect(states.append)
        msgs = [Message("user", "Hello there, how are you today?")]

        async def turn(n: int) -> PrefillDone:
            events = [e async for e in comp.proxy.chat(msgs, SamplingParams(max_tokens=4))]
            assert isinstance(events[-1], Done), events[-1]
            msgs.extend([Message("assistant", events[-1].text), Message("user", f"And then {n}?")])
            return next(e for e in events if isinstance(e, PrefillDone))

        aloop.run(turn(1))
        url = closed_port()
        assert aloop.run(comp.apply_settings(with_remotes(comp.settings, url))) is False
        assert comp.gateway is gateway and comp.hosts[0] is local and [h.worker_id for h in comp.hosts] == ["cpu0", "remote0"]
        assert states == [] and comp.window.phase is None and not comp.window.banner.isVisible()  # no "Restarting…"
        assert comp.window.status.currentMessage() == f"Remote worker added: {url} (remote0)."
        assert comp.model_name == "omnidesk-tiny" and "2 worker(s)" in comp.window.status.model_label.toolTip()
        end = time.monotonic() + 15  # it loads, then says that nothing answers there
        while (found := rows(comp))["remote0"][1] != "unreachable" and time.monotonic() < end:
            aloop.run(asyncio.sleep(0.1))
        assert set(found) == {"cpu0", "remote0"} and found["remote0"][1] == "unreachable" and url in found["remote0"][6]
        assert found["cpu0"][1] == "idle" and comp.window.status.workers_label.text() == "2 workers: 1 idle, 1 unreachable"
        comp.window.resize(1100, 700)
        screenshot(comp.window, "remote_added_live")
        assert 'omnidesk_worker_in_flight{worker="remote0"} 0.0' in comp.api.metrics.render().decode()
        second = aloop.run(turn(2))
        assert second.kind == "extend" and second.cached_tokens > 0  # the local worker kept its cache

        assert aloop.run(comp.apply_settings(with_remotes(comp.settings))) is False
        assert comp.gateway is gateway and comp.hosts == [local] and list(rows(comp)) == ["cpu0"]
        assert comp.window.status.currentMessage() == f"Remote worker removed: {url} (remote0)."
        assert [w.id for w in gateway.stats().workers] == ["cpu0"] and comp.monitor.status("remote0") is None
        scrape = comp.api.metrics.render().decode()  # /metrics: the worker gauges follow
        assert 'worker="cpu0"' in scrape and 'worker="remote0"' not in scrape
        third = aloop.run(turn(3))
        assert third.kind == "extend" and third.cached_tokens > second.cached_tokens and states == []
        assert json.loads((env / "config" / "settings.json").read_text())["remote_workers"] == []

        # with a model setting changed too, the whole engine is rebuilt, with the new servers in it
        async def reload() -> tuple[bool, bool]:
            return await comp.apply_settings(with_remotes(comp.settings, url, slots_per_worker=1)), await comp.wait_ready(60)
        assert aloop.run(reload()) == (True, True)
        assert comp.gateway is not gateway and [h.worker_id for h in comp.hosts] == ["cpu0", "remote0"]
        assert states[:2] == ["restarting", "loading"]
    finally:
        aloop.run(comp.shutdown(), 30)


def test_a_server_added_in_the_dialog_shows_up_without_a_restart(env, qapp, aloop, qtbot, screenshot):
    comp = Composition(qapp, Settings(model_source="tiny"), settings_path=env / "config" / "settings.json")
    comp.start()
    try:
        assert aloop.run(comp.wait_ready(60))
        states: list[str] = []
        comp.engine_state.connect(states.append)
        comp.open_settings()
        dialog = comp.settings_dialog
        page = dialog.pages[-2]  # Remote workers; the Tools page comes last
        dialog.tabs.setCurrentWidget(page)
        url = closed_port()
        page.url.setText(url)
        page.add_button.click()
        assert not dialog.reload_note.isVisible()  # nothing says the model will reload: it will not
        dialog.apply_button.click()
        end = time.monotonic() + 10
        while len(comp.hosts) < 2 and time.monotonic() < end:
            aloop.run(asyncio.sleep(0.05))
        assert [h.worker_id for h in comp.hosts] == ["cpu0", "remote0"] and states == []
        assert comp.window.phase is None and not comp.window.banner.isVisible()
        assert comp.window.status.currentMessage() == f"Remote worker added: {url} (remote0)."
        assert [w.url for w in comp.settings.remote_workers] == [url]
        comp.window.resize(1000, 640)
        screenshot(dialog, "remote_added_in_settings")
        screenshot(comp.window, "remote_added_status_bar")
    finally:
        aloop.run(comp.shutdown(), 30)
