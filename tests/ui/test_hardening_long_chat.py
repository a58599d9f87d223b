"""Issue 19, item 7: opening a long conversation froze the window, superlinearly (500 messages
4.9 s, 1,000 18 s, 5,000 5.6 min). The view now draws the last PAGE messages and adds earlier ones
a page at a time when the user scrolls to the top; each message's state is set once, not again
for every message on each append (that was the quadratic part)."""

from __future__ import annotations

import time

import pytest
from PySide6.QtCore import QPoint
from PySide6.QtWidgets import QAbstractSlider, QApplication

from desktop.chat.conversations import ConversationStore, ReplyVersion, StoredMessage
from desktop.settings import Settings
from desktop.ui.chat import ChatPage
from desktop.ui.chat import message_view
from desktop.ui.chat.message_view import MessageView
from desktop.ui.chat.message_widget import MessageWidget

pytestmark = pytest.mark.hardening
PAGE = getattr(message_view, "PAGE", 40)  # messages drawn at once (the view before issue 19 had none)

STATS = {"input_tokens": 30, "cached_tokens": 20, "generated_tokens": 8, "kind": "extend", "finish_reason": "eos"}


def turns(n: int) -> list[StoredMessage]:
    """A chat of short turns (the kind that fills an 8k context), the last reply with two versions."""
    out = [StoredMessage("user", f"Question {i}: what about step {i}?") if i % 2 == 0 else
           StoredMessage("assistant", f"Answer {i}: see [the docs](https://example.org/{i}).", dict(STATS))
           for i in range(n)]
    out[-1].versions, out[-1].shown = [ReplyVersion("An older answer.", dict(STATS), 0.0)], 1
    return out


def long_page(tmp_path, qtbot, n: int) -> tuple[ChatPage, str]:
    store = ConversationStore(tmp_path / "conversations")
    conv = store.new("Be brief.")
    conv.messages = turns(n)
    store.save(conv)
    page = ChatPage(object(), store, Settings)  # no model: nothing is sent here
    qtbot.addWidget(page)
    page.resize(1000, 700)
    page.show()
    qtbot.waitExposed(page)
    page.new_conversation()
    return page, conv.id


def settle(qtbot) -> None:
    for _ in range(3):
        QApplication.processEvents()
        qtbot.wait(20)


def y_in_view(view: MessageView, widget: MessageWidget) -> int:
    return widget.mapTo(view.viewport(), QPoint(0, 0)).y()


def test_opening_1000_messages_draws_a_bounded_page(tmp_path, qtbot):
    page, conv_id = long_page(tmp_path, qtbot, 1000)
    assert page.open_conversation(conv_id)
    view = page.view
    assert len(view.widgets()) == PAGE <= 60 and view.count() == 1000
    assert [w.index for w in view.widgets()] == list(range(1000 - PAGE, 1000))
    assert view.earlier_button.isVisible() and "960" in view.earlier_button.text()
    # every behaviour of the last reply is still there: versions, Regenerate, badge, Copy, links
    last = view.widgets()[-1]
    assert last.version_label.text() == "2/2" and last.regenerate_button.isVisibleTo(last)
    assert not view.widgets()[-3].regenerate_button.isVisibleTo(view.widgets()[-3])
    assert last.badge.isVisibleTo(last) and "example.org" in last.body.toHtml()
    last.copy_button.click()
    assert QApplication.clipboard().text() == last.text()


def test_opening_5000_messages_is_quick_and_scrolling_up_brings_earlier_ones(tmp_path, qtbot):
    page, conv_id = long_page(tmp_path, qtbot, 5000)
    start = time.perf_counter()
    assert page.open_conversation(conv_id)
    settle(qtbot)
    took = time.perf_counter() - start
    view = page.view
    assert took < 20, f"opening took {took:.1f} s"  # was minutes; about 1 s here even on a loaded machine
    assert len(view.findChildren(MessageWidget)) <= 2 * PAGE
    bar = view.verticalScrollBar()
    assert bar.value() == bar.maximum() > 0  # at the end, as before
    top = view.widgets()[0]
    bar.triggerAction(QAbstractSlider.SliderAction.SliderToMinimum)  # the user scrolls to the top
    before = y_in_view(view, top)
    qtbot.waitUntil(lambda: len(view.widgets()) == 2 * PAGE)
    settle(qtbot)
    assert view.widgets()[0].index == 5000 - 2 * PAGE and view.earlier_count() == 5000 - 2 * PAGE
    assert abs(y_in_view(view, top) - before) <= 2  # what the user was reading stays in place
    assert bar.value() > 0
    view.grab().save("/tmp/shots/long-chat-after-scrolling-up.png")
    view.earlier_button.click()  # the button at the top does the same
    assert len(view.widgets()) == 3 * PAGE and view.widget_at(5000 - 3 * PAGE).index == 5000 - 3 * PAGE
    # an earlier message keeps its actions: Edit emits its index in the conversation
    asked: list[int] = []
    view.edit_requested.connect(asked.append)
    user = next(w for w in view.widgets() if w.role == "user")
    user.edit_button.click()
    assert asked == [user.index] and page.conv.messages[user.index].content == user.text()


def test_adding_a_message_sets_up_one_widget_not_all(qtbot, monkeypatch):
    """The quadratic part: every append set every message's actions again."""
    view = MessageView()
    qtbot.addWidget(view)
    view.set_messages(turns(PAGE))
    calls: list[int] = []
    monkeypatch.setattr(MessageWidget, "set_can_regenerate",
                        lambda self, can, _orig=MessageWidget.set_can_regenerate: calls.append(self.index) or _orig(self, can))
    view.append("user", "one more")
    assert len(calls) <= 3, calls
    assert view.widgets()[-2].regenerate_button.isHidden()  # the reply above is no longer the last
