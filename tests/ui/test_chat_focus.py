"""Where the keys go (review 2): the message box has the focus when the window first shows and
each time the user comes back to the Chat page, and again after a dialog closes; a letter typed
on the sidebar never switches the page."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from desktop.chat.conversations import ConversationStore
from desktop.settings import Settings
from desktop.ui.chat import ChatPage
from desktop.ui.main_window import MainWindow


@pytest.fixture
def window(qtbot, tmp_path):
    """The window as the app builds it: the chat page set before the window shows."""
    window = MainWindow(Settings(), lambda: None)
    qtbot.addWidget(window)
    window.set_chat_page(ChatPage(object(), ConversationStore(tmp_path / "c"), Settings))
    window.resize(1000, 640)
    window.show()
    window.activateWindow()
    assert QTest.qWaitForWindowActive(window)
    return window


def typed(window: MainWindow, text: str) -> None:
    """Type as a user does: each key goes to whatever has the focus now."""
    for ch in text:
        QTest.keyClick(QApplication.focusWidget() or window, ch)


def test_the_message_box_has_the_keys_at_start(window, screenshot):
    edit = window.chat_page.composer.edit
    assert QApplication.focusWidget() is edit
    typed(window, "hallo")  # "a" used to be the sidebar's type-ahead for Admin
    assert window.current_page == "chat" and edit.toPlainText() == "hallo"
    screenshot(window, "chat-focus-at-start")


def test_back_on_the_chat_page_the_message_box_has_the_keys(window, qtbot):
    edit = window.chat_page.composer.edit
    QTest.keyClick(window, Qt.Key.Key_4, Qt.KeyboardModifier.ControlModifier)
    assert window.current_page == "admin"
    QTest.keyClick(QApplication.focusWidget() or window, Qt.Key.Key_1, Qt.KeyboardModifier.ControlModifier)
    assert window.current_page == "chat" and QApplication.focusWidget() is edit
    # by the sidebar: a click on Admin, then on Chat
    nav = window.nav
    QTest.mouseClick(nav.viewport(), Qt.MouseButton.LeftButton, pos=nav.visualItemRect(nav.item(3)).center())
    assert window.current_page == "admin"
    QTest.mouseClick(nav.viewport(), Qt.MouseButton.LeftButton, pos=nav.visualItemRect(nav.item(0)).center())
    assert window.current_page == "chat" and QApplication.focusWidget() is edit
    # a click on Chat while it is shown gives the keys back to the message box too
    QTest.mouseClick(nav.viewport(), Qt.MouseButton.LeftButton, pos=nav.visualItemRect(nav.item(0)).center())
    assert QApplication.focusWidget() is edit


def test_a_letter_on_the_sidebar_does_not_switch_the_page(window):
    nav = window.nav
    nav.setFocus()
    for ch in "acr":  # Admin, Call, Recordings by their first letters
        QTest.keyClick(nav, ch)
        assert window.current_page == "chat"
    QTest.keyClick(nav, Qt.Key.Key_Down)  # the arrow keys still move between pages
    assert window.current_page == "call"


def test_the_focus_comes_back_after_a_dialog(window, qtbot):
    edit = window.chat_page.composer.edit
    typed(window, "draft")
    dialog = window.show_shortcuts()  # F1
    qtbot.waitUntil(lambda: dialog.isVisible())
    dialog.accept()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is edit)
    typed(window, "!")
    assert edit.toPlainText() == "draft!"
