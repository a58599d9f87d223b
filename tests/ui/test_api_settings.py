"""The local API from the app: started and stopped live from Settings (no model reload), its real
state on the settings page (listening, port in use, off), served on the app's own qasync loop
through the app's gateway, and its queued requests listed on the Admin page as from the API."""

from __future__ import annotations

import asyncio
import socket

import httpx
import pytest
from PySide6.QtCore import Qt

from desktop.api.server import ApiState
from desktop.composition import Composition
from desktop.model.messages import Message
from desktop.model.params import SamplingParams
from desktop.protocol import ChunkEvent
from desktop.settings import Settings
from desktop.ui.settings_dialog import SettingsDialog


@pytest.fixture
def comp(tmp_path, monkeypatch, qapp, aloop, qtbot):
    for name in ("CONFIG", "DATA", "LOG"):
        monkeypatch.setenv(f"OMNIDESK_{name}_DIR", str(tmp_path / name.lower()))
    c = Composition(qapp, Settings(model_source="tiny", slots_per_worker=1), settings_path=tmp_path / "settings.json")
    c.start()
    assert aloop.run(c.wait_ready(60))
    qtbot.waitExposed(c.window)
    yield c
    aloop.run(c.shutdown(), 30)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def state_becomes(c: Composition, state: ApiState) -> None:
    while c.api.status.state is not state:
        await asyncio.sleep(0.02)


def test_settings_start_and_stop_the_api_live(comp, aloop, qtbot, screenshot):
    c = comp
    c.open_settings()
    dlg = c.settings_dialog
    page = dlg.api_page
    dlg.tabs.setCurrentWidget(page)
    assert page.state.text() == "Off" and not page.port.isEnabled()
    port = free_port()
    page.enabled.setChecked(True)
    page.port.setValue(port)
    assert page.state.text() == "Off · starts when you press Apply or OK"
    qtbot.mouseClick(dlg.apply_button, Qt.MouseButton.LeftButton)
    aloop.run(state_becomes(c, ApiState.LISTENING), 10)
    assert page.state.text() == f"Listening on http://127.0.0.1:{port}" and c.model_name is not None  # no reload
    assert c.settings.api_server_enabled and c.settings.api_port == port
    screenshot(dlg, "settings_api_listening")

    async def use_it() -> None:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            r = await client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "Hi"}],
                                                                "max_tokens": 3})
            assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] > 0
            hog = c.proxy.chat([Message("user", "A long story")], SamplingParams(max_tokens=4000, ignore_eos=True))
            while not isinstance(await hog.__anext__(), ChunkEvent):  # the only slot is taken
                pass
            queued = asyncio.ensure_future(client.post("/v1/chat/completions", json={
                "messages": [{"role": "user", "content": "Me too"}], "max_tokens": 2}))
            while not c.gateway.stats().queue.length:
                await asyncio.sleep(0.02)
            c.window.show_page("admin")
            c.window.refresh()
            model = c.window.admin.queue
            assert model.data(model.index(0, 3)) == "API"
            await hog.aclose()
            assert (await queued).status_code == 200
            c.window.refresh()
            assert c.window.admin.counters.requests.detail.text().endswith("· 2\u00a0via API")
            metrics = (await client.get("/metrics")).text
            assert 'omnidesk_requests_total{kind="chat",origin="api",outcome="completed"} 2.0' in metrics

    aloop.run(use_it(), 60)
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        page.port.setValue(taken.getsockname()[1])
        qtbot.mouseClick(dlg.apply_button, Qt.MouseButton.LeftButton)
        aloop.run(state_becomes(c, ApiState.PORT_IN_USE), 10)
        assert "is in use by another program" in page.state.text()
        screenshot(dlg, "settings_api_port_in_use")
    finally:
        taken.close()
    page.port.setValue(port)
    page.enabled.setChecked(False)
    qtbot.mouseClick(dlg.apply_button, Qt.MouseButton.LeftButton)
    aloop.run(state_becomes(c, ApiState.OFF), 10)
    assert page.state.text() == "Off"


def test_listening_beyond_this_computer_needs_a_key(qtbot):
    dlg = SettingsDialog(Settings(model_source="tiny"))  # not wired to an app: nothing is started
    qtbot.addWidget(dlg)
    page = dlg.api_page
    page.enabled.setChecked(True)
    page.host.setCurrentText("0.0.0.0")
    assert not dlg.apply()
    assert "needs an API key" in dlg.error.text() and dlg.tabs.currentWidget() is page
    assert not page.reveal.isEnabled()  # no key: nothing to show
    qtbot.mouseClick(page.generate, Qt.MouseButton.LeftButton)
    assert len(page.key.text()) >= 30 and page.key.echoMode() == page.key.EchoMode.Normal
    assert page.reveal.isEnabled() and page.reveal.isChecked()
    with qtbot.waitSignal(dlg.applied) as sig:
        assert dlg.apply()
    assert sig.args[0].api_host == "0.0.0.0" and sig.args[0].api_key == page.key.text()
    page.key.setText("short")
    assert not dlg.apply() and "8 to 256 characters" in dlg.error.text()


def test_an_enabled_api_starts_with_the_app_and_stops_with_it(tmp_path, monkeypatch, qapp, aloop, qtbot):
    for name in ("CONFIG", "DATA", "LOG"):
        monkeypatch.setenv(f"OMNIDESK_{name}_DIR", str(tmp_path / name.lower()))
    port = free_port()
    c = Composition(qapp, Settings(model_source="tiny", api_server_enabled=True, api_port=port),
                    settings_path=tmp_path / "settings.json")
    c.start()

    async def scenario() -> None:
        await state_becomes(c, ApiState.LISTENING)
        assert await c.wait_ready(60)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            health = (await client.get("/health")).json()
            assert health == {"status": "ok", "model": c.model_name}
            assert [m["id"] for m in (await client.get("/v1/models")).json()["data"]] == [c.model_name]
        await c.shutdown()
        assert c.api.status.state is ApiState.OFF
        with socket.socket() as s:  # the port is free again
            s.bind(("127.0.0.1", port))

    aloop.run(scenario(), 60)
