"""Issue 19, new-user item 5: a conversation picked from a search opened at its bottom, without
jumping to the match or marking it. It now opens at the message the row's snippet shows (drawing
earlier messages of a long conversation as needed), with the words marked until the search ends."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from desktop.chat.conversations import ConversationStore, StoredMessage
from desktop.settings import Settings
from desktop.ui.chat import ChatPage
from desktop.ui.chat.conversation_model import DETAIL_ROLE

pytestmark = pytest.mark.hardening

MATCH = 30  # the message that mentions the zeppelin, of 150


@pytest.fixture
def page(tmp_path, qtbot) -> ChatPage:
    store = ConversationStore(tmp_path / "conversations")
    conv = store.new("Be brief.")
    conv.messages = [StoredMessage("user" if i % 2 == 0 else "assistant", f"Turn {i}: about trains and boats.")
                     for i in range(150)]
    conv.messages[MATCH] = StoredMessage("user", "How fast did the Graf Zeppelin cross the Atlantic in 1928?")
    store.save(conv)
    other = store.new("Be brief.")
    other.messages = [StoredMessage("user", "Something else"), StoredMessage("assistant", "Sure.")]
    store.save(other)
    page = ChatPage(object(), store, Settings)  # no model: nothing is sent here
    qtbot.addWidget(page)
    page.resize(1000, 640)
    page.show()
    qtbot.waitExposed(page)
    page.open_conversation(other.id)
    return page


def test_a_search_opens_the_conversation_at_the_match_with_the_words_marked(page, qtbot):
    lst = page.conversations
    lst.search.setText("zeppelin atlantic")
    lst.flush_search()
    model = lst.model
    assert model.rowCount() == 1
    detail = model.data(model.index(0, 0), DETAIL_ROLE)
    assert detail.startswith("How fast did the Graf Zeppelin")  # whole from its first word
    lst.view.setCurrentIndex(model.index(0, 0))  # the user picks the row
    view = page.view
    drawn = lambda: next((w for w in view.widgets() if w.index == MATCH), None)  # noqa: E731
    qtbot.waitUntil(lambda: drawn() is not None)
    widget = drawn()
    for _ in range(5):
        QApplication.processEvents()
        qtbot.wait(20)
    y = widget.mapTo(view.viewport(), QPoint(0, 0)).y()
    assert 0 <= y < view.viewport().height() - widget.height() // 2, y  # in sight, not at the bottom
    marked = sorted(s.cursor.selectedText().lower() for s in widget.body.extraSelections())
    assert marked == ["atlantic", "zeppelin"]
    view.grab().save("/tmp/shots/search-jump.png")
    bar = view.verticalScrollBar()
    bar.setValue(bar.maximum())  # the user reads on; a click on the open conversation's row jumps back
    QTest.mouseClick(lst.view.viewport(), Qt.MouseButton.LeftButton, pos=lst.view.visualRect(model.index(0, 0)).center())
    qtbot.waitUntil(lambda: 0 <= widget.mapTo(view.viewport(), QPoint(0, 0)).y() < view.viewport().height() // 2)
    lst.search.clear()  # the search is over: the marks go
    assert widget.body.extraSelections() == []
