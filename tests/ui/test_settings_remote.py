"""The Remote workers settings page (offscreen): a server is checked as it is added (refused in
words, nothing lost), removed with its button or Delete, asked whether it answers (a closed port;
a real llama.cpp server), and OK gives Settings that hold them."""

from __future__ import annotations

import socket

import pytest
from PySide6.QtCore import Qt

from desktop.settings import Settings
from desktop.ui.settings_dialog import SettingsDialog
from desktop.ui.settings_remote import RemotePage
from desktop.workers.remote.llama_server import LlamaServer


@pytest.fixture
def dialog(qtbot):
    def make(settings: Settings | None = None) -> tuple[SettingsDialog, RemotePage]:
        dlg = SettingsDialog(settings or Settings(), sound_devices=[])
        qtbot.addWidget(dlg)
        dlg.open()
        qtbot.waitExposed(dlg)
        page = dlg.pages[-2]  # the Tools page comes last
        assert isinstance(page, RemotePage)
        dlg.tabs.setCurrentWidget(page)
        return dlg, page
    return make


def fill(qtbot, page: RemotePage, url: str, model: str = "", key: str = "") -> None:
    for edit, text in ((page.url, url), (page.model, model), (page.key, key)):
        edit.clear()
        qtbot.keyClicks(edit, text)


def test_servers_are_added_checked_and_applied(dialog, qtbot, screenshot):
    dlg, page = dialog()
    assert not page.add_button.isEnabled() and not page.remove_button.isEnabled()
    fill(qtbot, page, "gpu.lan:8080/v1", "", "sk-1")
    qtbot.mouseClick(page.add_button, Qt.MouseButton.LeftButton)
    fill(qtbot, page, "ftp://nope")
    qtbot.mouseClick(page.add_button, Qt.MouseButton.LeftButton)
    assert page.error.text() == "Address: the address must start with http:// or https://."
    assert page.url.text() == "ftp://nope" and dlg.focusWidget() is page.url  # kept for correcting
    fill(qtbot, page, "http://gpu.lan:8080")
    qtbot.mouseClick(page.add_button, Qt.MouseButton.LeftButton)
    assert page.error.text() == "http://gpu.lan:8080 is already in the list."
    fill(qtbot, page, "http://10.0.0.7:8000", "Qwen/Qwen3-8B")
    qtbot.mouseClick(page.add_button, Qt.MouseButton.LeftButton)
    assert page.error.text() == "" and page.url.text() == "" and page.key.text() == ""
    rows = [[page.table.item(r, c).text() for c in range(3)] for r in range(page.table.rowCount())]
    assert rows == [["http://gpu.lan:8080", "server's default", "set"], ["http://10.0.0.7:8000", "Qwen/Qwen3-8B", "—"]]
    assert not dlg.reload_note.isVisible() and dlg.apply_button.isEnabled()  # they join live: no reload
    screenshot(dlg, "settings_remote_workers")
    with qtbot.waitSignal(dlg.applied) as applied:
        qtbot.mouseClick(dlg.ok_button, Qt.MouseButton.LeftButton)
    new: Settings = applied.args[0]
    assert [(w.url, w.model, w.api_key) for w in new.remote_workers] == [
        ("http://gpu.lan:8080", "", "sk-1"), ("http://10.0.0.7:8000", "Qwen/Qwen3-8B", "")]
    assert new.remote_specs()[0].headers == {"Authorization": "Bearer sk-1"}


def test_a_server_is_removed_with_the_button_or_delete(dialog, qtbot):
    start = Settings(remote_workers=[{"url": "http://a:1"}, {"url": "http://b:2"}, {"url": "http://c:3"}])
    dlg, page = dialog(start)
    page.table.selectRow(1)
    assert page.remove_button.isEnabled()
    qtbot.mouseClick(page.remove_button, Qt.MouseButton.LeftButton)
    assert [w.url for w in page.workers] == ["http://a:1", "http://c:3"]
    assert page.table.currentRow() == 1  # the next one is selected, so Delete again goes on
    page.table.setFocus()
    qtbot.keyClick(page.table, Qt.Key.Key_Delete)
    assert [w.url for w in page.workers] == ["http://a:1"] and page.table.rowCount() == 1
    with qtbot.waitSignal(dlg.applied) as applied:
        qtbot.mouseClick(dlg.apply_button, Qt.MouseButton.LeftButton)
    assert [w.url for w in applied.args[0].remote_workers] == ["http://a:1"]
    assert not start.needs_reload(applied.args[0])


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_check_says_when_a_server_does_not_answer(dialog, qtbot):
    dlg, page = dialog()
    url = f"http://127.0.0.1:{closed_port()}"
    fill(qtbot, page, url)
    with qtbot.waitSignal(page.checker.finished, timeout=10_000):
        qtbot.mouseClick(page.check_button, Qt.MouseButton.LeftButton)
        assert page.error.text() == f"Checking {url}…" and not page.check_button.isEnabled()
    assert page.error.text() == f"{url} does not answer: connection refused or host not found."
    assert page.check_button.isEnabled() and page.workers == []  # checking adds nothing


@pytest.mark.real_model
def test_check_names_what_a_live_server_serves(dialog, qtbot, screenshot):
    with LlamaServer(ctx=512, slots=2, threads=1) as server:
        dlg, page = dialog(Settings(remote_workers=[{"url": server.url}]))
        page.table.selectRow(0)  # nothing typed: the selected server is checked
        with qtbot.waitSignal(page.checker.finished, timeout=15_000) as result:
            qtbot.mouseClick(page.check_button, Qt.MouseButton.LeftButton)
        assert result.args[1] is True
        assert page.error.text() == f"{server.url} answers: SmolLM2-135M-Instruct.Q4_1.gguf · 2 slot(s) · 512-token context."
        screenshot(dlg, "settings_remote_check")
