"""The conversation actions in the menus: the list's context menu shows its keys (F2, Del) and they
work while it is open; the menu bar's Chat menu has Rename (F2), Export…, Delete (Del) and the
voice toggle (Ctrl+Shift+V), each wired to what the key or button does, and every key, sent to the
window, fires once (no "Ambiguous shortcut overload"). No model is needed here."""

from __future__ import annotations

import time

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QAbstractItemView, QApplication, QLineEdit, QMenu

from desktop.chat.conversations import ConversationStore, StoredMessage
from desktop.speech.voice import Voice
from desktop.media.fake_audio import FakeAudioOutput
from desktop.model.tts import EspeakTTS
from desktop.settings import Settings
from desktop.ui.chat import ChatPage, dialogs
from desktop.ui.main_window import MainWindow
from desktop.ui.shortcuts import SHORTCUTS, ShortcutsDialog


class _Clock:
    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(seconds, 0))


@pytest.fixture
def store(tmp_path) -> ConversationStore:
    store = ConversationStore(tmp_path / "conversations")
    for text in ("Plan a trip to Lisbon", "Python decorators explained"):
        conv = store.new("Be brief.", "concise")
        conv.messages = [StoredMessage("user", text), StoredMessage("assistant", f"About {text}.")]
        store.save(conv)
    return store


@pytest.fixture
def voice():
    speaker = FakeAudioOutput(_Clock(), device_rate=22050)
    v = Voice(lambda: EspeakTTS(rate_wpm=300), speaker, clock=speaker.clock)  # never speaks here
    yield v
    v.close()


@pytest.fixture
def window(store, voice, qtbot):
    settings = Settings(voice_enabled=False)
    window = MainWindow(settings, lambda: None)
    qtbot.addWidget(window)
    page = ChatPage(object(), store, lambda: settings, voice=voice)  # the gateway is never called here
    window.set_chat_page(page)
    window.resize(1100, 720)
    window.show()
    qtbot.waitExposed(window)
    window.activateWindow()
    assert QTest.qWaitForWindowActive(window), "shortcuts only reach the active window"
    page.open_conversation(page.conversations.model.id_at(0))
    page.focus_composer()
    return window


def editor_of(view) -> QLineEdit:
    return next(e for e in view.viewport().findChildren(QLineEdit) if e.isVisible())


def no_ambiguity(qtlog) -> None:
    assert not [r.message for r in qtlog.records if "mbiguous" in r.message]


def test_context_menu_shows_its_keys_and_binds_no_second_shortcut(window, qtbot, qtlog, screenshot):
    page = window.chat_page
    view = page.conversations.view
    view.customContextMenuRequested.emit(view.visualRect(page.conversations.model.index(0, 0)).center())
    menu = next(m for m in page.conversations.findChildren(QMenu) if m.isVisible())
    keys = {a.text(): a.shortcut().toString() for a in menu.actions() if not a.isSeparator()}
    assert keys == {"Rename": "F2", "Export…": "", "Delete…": "Del"}
    assert all(a.isShortcutVisibleInContextMenu() for a in menu.actions() if not a.shortcut().isEmpty())
    screenshot(menu, "conversation_context_menu")
    next(a for a in menu.actions() if a.text() == "Rename").trigger()  # what a click does
    menu.close()
    qtbot.waitUntil(lambda: view.state() == QAbstractItemView.State.EditingState)
    QTest.keyClick(editor_of(view), Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: view.state() != QAbstractItemView.State.EditingState)
    window.activateWindow()
    assert QTest.qWaitForWindowActive(window)
    page.focus_composer()
    QTest.keyClick(window, Qt.Key.Key_F2)  # once the menu is closed the window's F2 alone fires
    qtbot.waitUntil(lambda: view.state() == QAbstractItemView.State.EditingState)
    no_ambiguity(qtlog)


def test_chat_menu_has_the_conversation_actions(window, qtbot, monkeypatch, tmp_path, screenshot):
    page = window.chat_page
    texts = [a.text() for a in window.chat_menu.actions() if not a.isSeparator()]
    assert texts == ["Search conversations", "Stop the reply\tEsc", "Rename conversation", "Export conversation…",
                     "Delete conversation…\tDel", "Speak replies aloud\tCtrl+Shift+V"]
    assert window.actions["rename"].shortcut().toString() == "F2"
    window.chat_menu.aboutToShow.emit()  # the voice item follows the Voice button
    assert window.actions["voice"].isEnabled() and not window.actions["voice"].isChecked()
    window.chat_menu.popup(window.mapToGlobal(QPoint(60, 30)))
    qtbot.waitUntil(window.chat_menu.isVisible)
    screenshot(window.chat_menu, "chat_menu")
    window.chat_menu.close()

    asked: list[str] = []
    monkeypatch.setattr(dialogs, "confirm_delete", lambda _parent, title, _yes: asked.append(title))
    window.actions["delete"].trigger()
    assert asked == [page.conv.title]
    out = tmp_path / "out.md"
    monkeypatch.setattr(dialogs, "ask_export_path", lambda _parent, _title: str(out))
    window.actions["export"].trigger()
    assert out.is_file() and "Python decorators" in out.read_text()
    window.actions["voice"].trigger()
    assert page.speech.button.isChecked()
    window.chat_menu.aboutToShow.emit()
    assert window.actions["voice"].isChecked()
    window.actions["voice"].trigger()
    assert not page.speech.button.isChecked()

    said: list[str] = []
    page.status.connect(said.append)
    page.new_conversation()  # not saved yet: the actions say why nothing happens
    window.actions["rename"].trigger()
    assert said[-1].startswith("Nothing to rename yet")
    assert page.conversations.view.state() != QAbstractItemView.State.EditingState


def test_each_key_sent_to_the_window_fires_once(window, qtbot, qtlog, monkeypatch):
    page = window.chat_page
    view = page.conversations.view
    window.activateWindow()
    assert QTest.qWaitForWindowActive(window)
    page.focus_composer()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is page.composer.edit)
    QTest.keyClick(window, Qt.Key.Key_F2)  # from the message box: renames the open conversation
    qtbot.waitUntil(lambda: view.state() == QAbstractItemView.State.EditingState)
    assert view.currentIndex().row() == page.conversations.model.row_of(page.conv.id)
    assert QApplication.focusWidget() is editor_of(view)  # typing goes to the new title
    QTest.keyClick(editor_of(view), Qt.Key.Key_Escape)  # the editor closes unchanged
    qtbot.waitUntil(lambda: view.state() != QAbstractItemView.State.EditingState)

    toggled: list[bool] = []
    page.voice_toggled.connect(toggled.append)
    QTest.keyClick(window, Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    qtbot.waitUntil(lambda: toggled == [True])  # the button's shortcut clicks it animated (≈100 ms)
    qtbot.wait(200)
    assert toggled == [True]

    asked: list[str] = []
    monkeypatch.setattr(dialogs, "confirm_delete", lambda _parent, title, _yes: asked.append(title))
    view.setFocus()
    QTest.keyClick(view, Qt.Key.Key_Delete)  # Del is the list's own key
    assert asked == [page.conv.title]

    window.show_page("admin")  # F2 elsewhere does not pull the user back to rename a conversation
    window.nav.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is window.nav)
    QTest.keyClick(window, Qt.Key.Key_F2)
    qtbot.wait(50)
    assert window.current_page == "admin" and view.state() != QAbstractItemView.State.EditingState
    no_ambiguity(qtlog)


def test_help_still_lists_every_key(window):
    dialog = window.show_shortcuts()
    assert isinstance(dialog, ShortcutsDialog)
    listed = dialog.listed()
    assert set(listed) == {s.text.rstrip("…") for s in SHORTCUTS}
    assert listed["Rename the selected conversation"] == "F2" and listed["Delete the selected conversation"] == "Del"
    assert listed["Speak replies aloud: on or off"] == "Ctrl+Shift+V"
    dialog.close()
