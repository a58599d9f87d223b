"""The chat page's conversation list: search, rename (F2, double-click editor, context menu),
delete with confirmation, and export as Markdown or JSON. No model is needed here."""

from __future__ import annotations

import json

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QAbstractItemView, QApplication, QMenu

from desktop.chat.conversations import ConversationStore, StoredMessage
from desktop.settings import Settings
from desktop.ui.chat import ChatPage, dialogs

STATS = {"input_tokens": 120, "cached_tokens": 100, "generated_tokens": 11, "kind": "extend", "ttft_ms": 40.0,
         "decode_ms": 500.0, "finish_reason": "eos"}


@pytest.fixture
def store(tmp_path) -> ConversationStore:
    store = ConversationStore(tmp_path / "conversations")
    for text in ("Plan a trip to Lisbon", "Python decorators explained", "Lisbon restaurants"):
        conv = store.new("Be brief.", "concise")
        conv.messages = [StoredMessage("user", text), StoredMessage("assistant", f"About {text}.", STATS)]
        store.save(conv)
    return store


@pytest.fixture
def page(store, qtbot) -> ChatPage:
    page = ChatPage(object(), store, Settings)  # the gateway is never called here
    qtbot.addWidget(page)
    page.resize(1100, 720)
    page.show()
    return page


def titles(page: ChatPage) -> list[str]:
    model = page.conversations.model
    return [model.data(model.index(i, 0)) for i in range(model.rowCount())]


def menu_for(page: ChatPage, row: int) -> QMenu:
    view = page.conversations.view
    view.customContextMenuRequested.emit(view.visualRect(page.conversations.model.index(row, 0)).center())
    menus = [m for m in page.conversations.findChildren(QMenu) if m.isVisible()]
    assert len(menus) == 1
    return menus[0]


def trigger(menu: QMenu, text: str) -> None:
    next(a for a in menu.actions() if a.text() == text).trigger()
    menu.close()


def test_list_is_newest_first_and_search_filters_by_title(page):
    assert titles(page) == ["Lisbon restaurants", "Python decorators explained", "Plan a trip to Lisbon"]
    assert page.current_conversation_id is None and page.view.widgets() == []  # a new conversation
    QTest.keyClicks(page.conversations.search, "lisbon")
    page.conversations.flush_search()  # typing searches once the keys pause
    assert titles(page) == ["Lisbon restaurants", "Plan a trip to Lisbon"]
    page.conversations.search.setText("nothing like it")
    page.conversations.flush_search()
    assert titles(page) == [] and page.conversations.empty.isVisible()
    page.conversations.search.clear()
    assert len(titles(page)) == 3


def test_clicking_a_conversation_opens_it(page):
    changed = []
    page.conversation_changed.connect(changed.append)
    view = page.conversations.view
    second = view.visualRect(page.conversations.model.index(1, 0)).center()
    QTest.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=second)
    assert page.current_conversation_id == changed[-1] and page.view.widgets()[0].text() == "Python decorators explained"
    assert page.view.widgets()[1].badge.text().startswith("cached 100 / new 20 tokens")
    page.view.widgets()[1].copy_button.click()
    assert QGuiApplication.clipboard().text() == "About Python decorators explained."
    page.new_conversation()
    assert changed[-1] == "" and page.current_conversation_id is None and page.conversations.current_id() is None


def test_rename_with_f2_and_from_the_menu(page, store, qtbot):
    first = page.conversations.model.id_at(0)
    page.open_conversation(first)
    page.conversations.view.setFocus()
    QTest.keyClick(page.conversations.view, Qt.Key.Key_F2)
    assert page.conversations.view.state() == QAbstractItemView.State.EditingState
    # what the editor commits when the user types a title and presses Enter
    page.conversations.model.setData(page.conversations.model.index(0, 0), "  Food in   Lisbon ")
    qtbot.waitUntil(lambda: store.get(first).title == "Food in Lisbon")  # applied once the editor has closed
    assert store.get(first).title == "Food in Lisbon" and titles(page)[0] == "Food in Lisbon"
    assert ConversationStore(store.root).get(first).title == "Food in Lisbon"
    trigger(menu_for(page, 1), "Rename")
    assert page.conversations.view.state() == QAbstractItemView.State.EditingState
    assert not page.conversations.model.setData(page.conversations.model.index(1, 0), "   ")  # empty: refused


def test_delete_asks_first(page, store, monkeypatch):
    asked = []
    monkeypatch.setattr(dialogs, "confirm_delete", lambda parent, title, on_yes: asked.append(title))
    victim = page.conversations.model.id_at(1)
    page.open_conversation(victim)
    trigger(menu_for(page, 1), "Delete…")
    assert asked == ["Python decorators explained"] and victim in store
    monkeypatch.setattr(dialogs, "confirm_delete", lambda parent, title, on_yes: on_yes())
    trigger(menu_for(page, 1), "Delete…")
    assert victim not in store and victim not in ConversationStore(store.root) and len(titles(page)) == 2


def test_deleting_the_open_conversation_opens_the_next_one(page, store, monkeypatch, qtbot, screenshot):
    """Not the empty "Start a conversation" page while others are there (review 2, 24_deletedc)."""
    monkeypatch.setattr(dialogs, "confirm_delete", lambda parent, title, on_yes: on_yes())
    lst = page.conversations
    page.open_conversation(lst.model.id_at(1))
    page.delete(lst.model.id_at(1))  # the middle one: the next in the list opens
    assert titles(page) == ["Lisbon restaurants", "Plan a trip to Lisbon"]
    assert page.current_conversation_id == lst.current_id() == lst.model.id_at(1)
    assert page.view.widgets()[0].text() == "Plan a trip to Lisbon"
    qtbot.wait(50)  # laid out before the picture
    screenshot(page, "chat-deleted-opens-next")
    lst.view.setFocus()
    QTest.keyClick(lst.view, Qt.Key.Key_Delete)  # the last one (open, current): the one before it opens
    assert titles(page) == ["Lisbon restaurants"]
    assert page.current_conversation_id == lst.current_id() == lst.model.id_at(0)
    assert page.view.widgets()[0].text() == "Lisbon restaurants"
    QTest.keyClick(lst.view, Qt.Key.Key_Delete)  # none left: a new conversation
    assert titles(page) == [] and page.current_conversation_id is None and page.view.widgets() == []
    assert len(store.list()) == 0


def test_deleting_another_conversation_keeps_the_open_one(page, store, monkeypatch):
    monkeypatch.setattr(dialogs, "confirm_delete", lambda parent, title, on_yes: on_yes())
    shown = page.conversations.model.id_at(0)
    page.open_conversation(shown)
    page.delete(page.conversations.model.id_at(2))
    assert page.current_conversation_id == shown and page.conversations.current_id() == shown


def test_esc_in_the_search_box_clears_it_then_leaves_it(page, qtbot):
    search = page.conversations.search
    page.window().activateWindow()
    search.setFocus()
    QTest.keyClicks(search, "python")
    page.conversations.flush_search()
    assert titles(page) == ["Python decorators explained"]
    QTest.keyClick(search, Qt.Key.Key_Escape)  # with text: the search is cleared, every conversation is back
    assert search.text() == "" and len(titles(page)) == 3 and search.hasFocus()
    QTest.keyClick(search, Qt.Key.Key_Escape)  # on the empty box: the keys go back to the message box
    qtbot.waitUntil(page.composer.edit.hasFocus)


@pytest.mark.parametrize("suffix", ["md", "json"])
def test_export_from_the_menu(page, store, tmp_path, monkeypatch, suffix):
    target = tmp_path / f"out.{suffix}"
    monkeypatch.setattr(dialogs, "ask_export_path", lambda parent, title: str(target))
    statuses = []
    page.status.connect(statuses.append)
    conv_id = page.conversations.model.id_at(2)
    trigger(menu_for(page, 2), "Export…")
    text = target.read_text(encoding="utf-8")
    if suffix == "md":
        assert text.startswith("# Plan a trip to Lisbon\n") and "## Assistant\n\nAbout Plan a trip to Lisbon." in text
        assert "cached 100 / new 20 tokens" in text
    else:
        data = json.loads(text)
        assert data["id"] == conv_id and [m["content"] for m in data["messages"]][0] == "Plan a trip to Lisbon"
    assert statuses[-1].startswith("Exported “Plan a trip to Lisbon”")


def test_export_file_names_get_a_suffix():
    assert dialogs.suggested_file_name("What is a KV cache?") == "What is a KV cache.md"
    assert dialogs.suggested_file_name("///") == "conversation.md"


def test_del_works_right_after_a_rename_in_the_editor(page, store, monkeypatch, qtbot):
    """F2, type, Enter, then Del: the list is back out of editing (the rename is applied after
    the editor closes), so Del asks to delete the renamed conversation at once."""
    asked = []
    monkeypatch.setattr(dialogs, "confirm_delete", lambda parent, title, on_yes: asked.append(title))
    view = page.conversations.view
    first = page.conversations.model.id_at(0)
    page.open_conversation(first)
    page.window().show()
    page.window().activateWindow()
    qtbot.waitActive(page.window())
    view.setFocus()
    assert QApplication.focusWidget() is view
    QTest.keyClick(view, Qt.Key.Key_F2)
    editor = QApplication.focusWidget()
    assert view.state() == QAbstractItemView.State.EditingState and editor not in (view, None)
    editor.selectAll()
    QTest.keyClicks(editor, "Food in Lisbon")
    QTest.keyClick(editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: store.get(first).title == "Food in Lisbon")
    assert view.state() != QAbstractItemView.State.EditingState
    assert QApplication.focusWidget() is view, QApplication.focusWidget()  # where the next key goes
    QTest.keyClick(QApplication.focusWidget(), Qt.Key.Key_Delete)
    assert asked == ["Food in Lisbon"]
