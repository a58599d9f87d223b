"""Main window tests (offscreen, tiny model): navigation and keyboard shortcuts, the status bar
and loading banner, theme, remembered geometry/page, and settings applied live or by reload."""

from __future__ import annotations

import asyncio
import json

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QMessageBox

from desktop.composition import Composition
from desktop.settings import Settings, load_settings
from desktop.gateway.monitor import Snapshot, WorkerRow
from desktop.protocol.engine_stats import QueueStats, RequestCounts
from desktop.ui.main_window import MainWindow
from desktop.ui.shortcuts import SHORTCUTS, ShortcutsDialog, binds, native, window_shortcuts
from desktop.ui.theme import apply_theme


@pytest.fixture
def env(tmp_path, monkeypatch):
    for name in ("CONFIG", "DATA", "LOG"):
        monkeypatch.setenv(f"OMNIDESK_{name}_DIR", str(tmp_path / name.lower()))
    return tmp_path


@pytest.fixture
def make_comp(env, qapp, aloop):
    made: list[Composition] = []

    def make(warning: str | None = None, **fields) -> Composition:
        path = env / "config" / "settings.json"
        fields.setdefault("model_source", "tiny")
        comp = Composition(qapp, Settings(**fields), warning=warning, settings_path=path)
        comp.start()
        made.append(comp)
        # Load before any qtbot wait: a nested Qt loop steps pending tasks outside asyncio's loop.
        aloop.run(comp.wait_ready(60))
        return comp

    yield make
    for comp in made:
        aloop.run(comp.shutdown(), 30)


def key(widget, key: Qt.Key, modifier=Qt.KeyboardModifier.ControlModifier) -> None:
    window = widget.window()
    window.activateWindow()
    assert QTest.qWaitForWindowActive(window), "shortcuts only reach the active window"
    widget.setFocus()
    QTest.keyClick(widget, key, modifier)


def test_navigation_by_sidebar_and_shortcuts(make_comp, aloop, qtbot, monkeypatch, screenshot):
    comp = make_comp()
    window = comp.window
    qtbot.waitExposed(window)
    assert comp.model_name == "omnidesk-tiny"
    window.activateWindow()
    assert QTest.qWaitForWindowActive(window)
    assert QApplication.focusWidget() is comp.chat_page.composer.edit  # the keys go to the message box
    comp.open_settings()  # Ctrl+,, then closed: the keys come back to the message box
    qtbot.waitUntil(lambda: comp.settings_dialog is not None and comp.settings_dialog.isVisible())
    comp.settings_dialog.reject()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is comp.chat_page.composer.edit)
    for i, page in enumerate(("chat", "call", "recordings", "admin")):
        key(window, getattr(Qt.Key, f"Key_{i + 1}"))
        assert window.current_page == page
        assert window.stack.currentWidget() is window.pages[page]
    window.nav.setCurrentRow(1)  # a click on "Call"
    assert window.current_page == "call"
    from desktop.ui.call.page import CallPage

    page = window.pages["call"]
    assert isinstance(page, CallPage) and page is comp.call_page  # the real page, wired by the composition
    if page.mic_problem:  # no microphone on this machine: Start is off and the page says why
        assert not page.controls.call_button.isEnabled() and page.mic_problem in page.controls.reason.text()
    window.resize(1100, 700)
    screenshot(window, "main_window_call")

    calls: list[str] = []
    for name in ("new_conversation", "focus_composer", "focus_search", "stop"):
        monkeypatch.setattr(comp.chat_page, name, lambda name=name: calls.append(name))
    key(window, Qt.Key.Key_N)
    assert window.current_page == "chat" and calls[-2:] == ["new_conversation", "focus_composer"]
    window.show_page("admin")
    key(window, Qt.Key.Key_F)
    assert window.current_page == "chat" and calls[-1] == "focus_search"
    key(window.nav, Qt.Key.Key_Escape, Qt.KeyboardModifier.NoModifier)  # Esc from the sidebar
    assert calls[-1] == "stop"
    escapes: list[str] = []
    comp.chat_page.composer.edit.escape.connect(lambda: escapes.append("composer"))
    calls.clear()
    key(comp.chat_page.composer.edit, Qt.Key.Key_Escape, Qt.KeyboardModifier.NoModifier)
    assert escapes == ["composer"] and calls == []  # the composer's own Esc (stop or cancel an edit)


def test_help_lists_every_shortcut_and_settings_opens(make_comp, aloop, qtbot):
    comp = make_comp()
    window = comp.window
    qtbot.waitExposed(window)
    key(window, Qt.Key.Key_F1, Qt.KeyboardModifier.NoModifier)
    dialog = window.findChild(ShortcutsDialog)
    assert dialog is not None and dialog.isVisible()
    assert set(dialog.listed()) == {s.text.rstrip("…") for s in SHORTCUTS}
    for sc in window_shortcuts():  # the menus carry the same shortcuts
        action = window.actions[sc.action]
        assert action.shortcut().toString() == sc.keys if binds(sc) else action.text().endswith(f"\t{native(sc)}")
    dialog.close()
    key(window, Qt.Key.Key_Comma)
    assert comp.settings_dialog is not None and comp.settings_dialog.isVisible()
    dialog = comp.settings_dialog
    key(window, Qt.Key.Key_Comma)  # a second Ctrl+, raises the same dialog
    assert comp.settings_dialog is dialog
    dialog.applied.emit(comp.settings.model_copy(update={"top_k": 7}))  # what OK/Apply emit
    aloop.run(asyncio.sleep(0.05))
    assert comp.settings.top_k == 7
    dialog.reject()
    assert comp.settings_dialog is None


def test_ctrl_q_closes_and_asks_to_quit(make_comp, qtbot):
    comp = make_comp()
    qtbot.waitExposed(comp.window)
    with qtbot.waitSignal(comp.quit_requested, timeout=2000):
        key(comp.window, Qt.Key.Key_Q)
    assert not comp.window.isVisible()


def test_status_bar_shows_model_and_worker_state(make_comp, aloop, qtbot, screenshot):
    comp = make_comp(max_tokens=24)
    page = comp.chat_page

    async def one_turn() -> None:  # through the real chat page and the composition's gateway proxy
        page.send("Hello! What can you do?")
        while page.busy:
            await asyncio.sleep(0.02)

    aloop.run(one_turn(), 30)
    assert page.current_conversation_id and comp.settings.last_conversation_id == page.current_conversation_id
    qtbot.waitExposed(comp.window)
    comp.window.refresh()
    status = comp.window.status
    assert status.model_label.text() == "Model: omnidesk-tiny"
    assert status.workers_label.text() == "1 worker: idle"
    assert status.queue_label.text() == "Queue: empty"
    assert not comp.window.banner.isVisible()
    assert comp.window.windowTitle() == "omnidesk-tiny — Omnidesk"
    comp.window.resize(1100, 700)
    screenshot(comp.window, "main_window_chat")


def test_loading_progress_in_banner_and_status_bar(qapp, qtbot, env, screenshot):
    rows = [WorkerRow("cpu0", "loading", "cpu", 0, 4, 0, 4, 0, "Converting the embedded model (first run only)… 40%")]
    snap = Snapshot(rows, [], [], {}, RequestCounts(), {}, {}, QueueStats(length=2))
    window = MainWindow(Settings(), lambda: snap)
    qtbot.addWidget(window)
    window.show()
    window.refresh()
    assert window.banner.isVisible() and "Converting the embedded model" in window.banner.label.text()
    assert window.banner.bar.value() == 40
    assert window.status.workers_label.text() == "1 worker: loading 40%"
    assert window.status.queue_label.text() == "Queue: 2 waiting"
    window.resize(1000, 600)
    screenshot(window, "main_window_loading")
    rows[0] = WorkerRow("cpu0", "error", "cpu", 0, 4, 0, 4, 0, "No model at /nowhere")
    window.refresh()
    assert window.banner.error and "No model at /nowhere" in window.banner.label.text()
    assert window.banner.button.isVisible()
    screenshot(window, "main_window_load_error")
    with qtbot.waitSignal(window.settings_requested):
        window.banner.button.click()
    window.set_phase("Restarting the model with the new settings…")
    assert "Restarting" in window.banner.label.text() and window.banner.bar.maximum() == 0


def test_geometry_and_last_page_are_remembered(make_comp, aloop, qtbot, env):
    comp = make_comp()
    qtbot.waitExposed(comp.window)
    comp.window.resize(760, 520)
    size = (comp.window.width(), comp.window.height())
    comp.window.show_page("admin")
    comp.window.close()
    saved = json.loads((env / "config" / "settings.json").read_text())
    assert saved["window_geometry"] and saved["model_source"] == "tiny"
    settings, warning = load_settings(env / "config" / "settings.json")
    assert warning is None
    again = Composition(QApplication.instance(), settings, settings_path=env / "config" / "settings.json")
    window = again.start()
    try:
        aloop.run(again.wait_ready(60))
        assert (window.width(), window.height()) == size != (1120, 740)
        if "last_page" in Settings.model_fields:
            assert window.current_page == "admin"
    finally:
        aloop.run(again.shutdown(), 30)


@pytest.mark.parametrize("theme,dark", [("dark", True), ("light", False)])
def test_theme_setting_is_honoured(make_comp, qapp, theme, dark, screenshot):
    try:
        comp = make_comp(theme=theme)
        window_color = qapp.palette().color(QPalette.ColorRole.Window)
        assert (window_color.lightness() < 128) == dark
        comp.window.resize(1100, 700)
        comp.window.show_page("recordings")
        screenshot(comp.window, f"main_window_{theme}")
    finally:
        apply_theme(qapp, "system")  # the palette is app-wide: later tests get the default back


def test_settings_applied_live_or_by_reload_with_progress(make_comp, aloop, qtbot, env):
    comp = make_comp()
    first = comp.gateway
    states: list[str] = []
    banner_texts: list[str] = []

    def seen(state: str) -> None:
        states.append(state)
        banner_texts.append(comp.window.banner.label.text() if comp.window.banner.isVisible() else "")

    comp.engine_state.connect(seen)
    live = comp.settings.model_copy(update={"temperature": 1.2})
    assert aloop.run(comp.apply_settings(live)) is False
    assert comp.gateway is first and comp.settings.temperature == 1.2 and states == []
    assert json.loads((env / "config" / "settings.json").read_text())["temperature"] == 1.2

    reload = comp.settings.model_copy(update={"slots_per_worker": 2})

    async def apply_and_wait() -> tuple[bool, bool]:
        # one aloop.run: qasync steps pending tasks outside the loop once a run_until_complete ends
        return await comp.apply_settings(reload), await comp.wait_ready(60)

    assert aloop.run(apply_and_wait()) == (True, True)
    assert states == ["restarting", "loading", "ready"]
    assert "Restarting the model" in banner_texts[0] and "Restarting the model" in banner_texts[1]
    assert comp.gateway is not None and comp.gateway is not first
    workers = comp.gateway.stats().workers
    assert len(workers) == 1 and len(workers[0].slots) == 2
    comp.window.refresh()
    assert comp.window.status.workers_label.text() == "1 worker: idle" and not comp.window.banner.isVisible()
    assert json.loads((env / "config" / "settings.json").read_text())["slots_per_worker"] == 2


def test_a_model_that_cannot_load_shows_the_error(make_comp, aloop, env):
    comp = make_comp(model_source=str(env / "missing-model"))
    assert comp.model_name is None and comp.gateway is not None
    comp.window.refresh()
    assert comp.window.banner.isVisible() and comp.window.banner.error
    assert "could not be loaded" in comp.window.banner.label.text()
    assert comp.window.status.workers_label.text() == "1 worker: error"
    assert comp.window.status.model_label.text() == "No model loaded"


def test_corrupt_settings_warning_is_shown_with_open(make_comp):
    comp = make_comp(warning="Your settings file could not be read")
    boxes = [w for w in comp.window.findChildren(QMessageBox) if w.isVisible()]
    assert len(boxes) == 1 and "could not be read" in boxes[0].text()
    assert boxes[0].windowModality() == Qt.WindowModality.WindowModal  # open(), not exec()
    boxes[0].accept()
