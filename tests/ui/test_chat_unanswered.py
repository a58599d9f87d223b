"""Turns that end without an answer, on the tiny model (review 2): a conversation whose last message
is the user's (its reply failed before a restart) says so with a Retry that answers it; a message
that by itself is longer than the model's context goes back into the text box."""

from __future__ import annotations

import json

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from desktop.chat.conversations import ConversationStore, StoredMessage
from desktop.settings import Settings
from desktop.ui.chat import ChatPage
from desktop.ui.chat.notice import UNANSWERED, too_long
from test_chat_page import idle, make_page, say


@pytest.fixture
def gateway(two_slot_gateway):
    return two_slot_gateway


@pytest.fixture
def settings() -> Settings:
    return Settings(temperature=0.0, max_tokens=12)


def roles(page: ChatPage) -> list[str]:
    return [m.role for m in page.conv.messages]


def test_an_unanswered_message_after_a_restart_says_so_and_retry_answers_it(gateway, tmp_path, settings, aloop,
                                                                           qtbot, screenshot):
    store = ConversationStore(tmp_path / "conversations")
    conv = store.new("Be brief.")
    conv.messages = [StoredMessage("user", "Hi"), StoredMessage("assistant", "Hello!"), StoredMessage("user", "Hello?")]
    store.save(conv)  # as the app left it: the reply to "Hello?" failed (no model), then it was closed
    settings.last_conversation_id = conv.id
    page = make_page(gateway, tmp_path, settings, qtbot)  # the app starts again
    assert page.current_conversation_id == conv.id
    notice = page.view.notice()
    assert notice is not None and notice.label.text() == UNANSWERED and notice.retry_button.isVisibleTo(page)
    qtbot.wait(30)
    screenshot(page, "chat-unanswered-after-restart")
    notice.retry_button.click()
    aloop.run(idle(page))
    assert roles(page) == ["user", "assistant", "user", "assistant"]  # answered, not sent twice
    assert [m.content for m in page.conv.messages[:3]] == ["Hi", "Hello!", "Hello?"] and page.conv.messages[3].content
    assert page.view.notice() is None and len(page.view.widgets()) == 4
    saved = json.loads((store.root / f"{conv.id}.json").read_text())
    assert [m["role"] for m in saved["messages"]] == ["user", "assistant", "user", "assistant"]


def test_the_notice_shows_on_opening_and_not_on_answered_conversations(gateway, tmp_path, settings, aloop, qtbot):
    store = ConversationStore(tmp_path / "conversations")
    answered = store.new()
    answered.messages = [StoredMessage("user", "Hi"), StoredMessage("assistant", "Hello!")]
    store.save(answered)
    waiting = store.new()
    waiting.messages = [StoredMessage("user", "Anyone there?")]
    store.save(waiting)
    page = make_page(gateway, tmp_path, settings, qtbot)
    assert page.view.notice() is None  # a new conversation
    page.open_conversation(waiting.id)
    assert page.view.notice() is not None and page.view.notice().label.text() == UNANSWERED
    page.open_conversation(answered.id)
    assert page.view.notice() is None
    aloop.run(idle(page))


def test_editing_into_a_branch_shows_no_unanswered_notice_while_it_replies(gateway, tmp_path, settings, aloop, qtbot):
    page = make_page(gateway, tmp_path, settings, qtbot)
    aloop.run(say(page, "One"))
    page.edit(0)
    page.composer.edit.setPlainText("Two")
    QTest.keyClick(page.composer.edit, Qt.Key.Key_Return)
    assert page.busy and page.view.notice() is None  # the branch's message is being answered
    aloop.run(idle(page))
    assert roles(page) == ["user", "assistant"] and page.view.notice() is None


def test_a_message_too_long_for_the_model_goes_back_into_the_text_box(gateway, tmp_path, settings, aloop, qtbot,
                                                                     screenshot):
    page = make_page(gateway, tmp_path, settings, qtbot)
    big = " ".join(f"w{i % 10}" for i in range(4000))  # ~8,000 tokens; the tiny model takes 2,048
    assert len(big) < 16_384  # under the characters' limit: the worker's token count refuses it
    aloop.run(say(page, big))
    assert page.composer.edit.toPlainText() == big  # the text is kept ...
    assert page.conv.messages == [] and page.current_conversation_id is None  # ... not in a conversation
    assert page.store.list() == [] and not list(page.store.root.glob("*.json"))
    notice = page.view.notice()
    assert notice is not None and not notice.retry_button.isVisibleTo(page)
    assert notice.label.text().startswith("This message is too long for the model: with it the conversation is ")
    assert "the limit is 2,048." in notice.label.text() and "grown too long" not in notice.label.text()
    # the headline's token count is the detail's (issue 19)
    assert notice.label.text().split(" tokens")[0].split()[-1] in notice.detail.text()
    qtbot.wait(30)
    screenshot(page, "chat-message-too-long")
    # shortened, it is sent into the same new conversation
    page.composer.edit.setPlainText("Short now")
    QTest.keyClick(page.composer.edit, Qt.Key.Key_Return)
    aloop.run(idle(page))
    assert roles(page) == ["user", "assistant"] and page.conv.title == "Short now" and page.view.notice() is None
    assert [c.id for c in page.store.list()] == [page.conv.id]


def test_a_long_message_in_a_conversation_goes_back_and_the_rest_stays(gateway, tmp_path, settings, aloop, qtbot):
    page = make_page(gateway, tmp_path, settings, qtbot)
    aloop.run(say(page, "Hello"))
    conv_id = page.current_conversation_id
    big = " ".join(f"w{i % 10}" for i in range(4000))
    aloop.run(say(page, big))
    assert page.composer.edit.toPlainText() == big and roles(page) == ["user", "assistant"]
    assert page.current_conversation_id == conv_id and len(page.view.widgets()) == 2
    saved = ConversationStore(page.store.root).get(conv_id)
    assert [m.role for m in saved.messages] == ["user", "assistant"]


def test_a_paste_too_long_at_any_count_goes_back_too(gateway, tmp_path, settings, aloop, qtbot):
    """Over the gateway's characters' limit (it refuses before any worker counts tokens), in an
    ongoing conversation: the bigger paste went into the conversation as an unanswered turn."""
    page = make_page(gateway, tmp_path, settings, qtbot)
    aloop.run(say(page, "Hello"))
    huge = " ".join(["word"] * 5_000)  # 24,999 characters: over the tiny model's 16,384
    aloop.run(say(page, huge))
    assert page.composer.edit.toPlainText() == huge and roles(page) == ["user", "assistant"]
    assert page.view.notice().label.text().startswith("This message is too long for the model (24,999 characters")


def test_too_long_tells_the_message_from_the_conversation():
    detail = ("This conversation is 12071 tokens long; the model's context window is 8192 tokens. "
              "Start a new conversation or shorten the message.")
    assert too_long(detail, 48_000, 48_100, alone=True) == \
        "This message is too long for the model: with it the conversation is 12,071 tokens; the limit is 8,192."
    assert too_long(detail, 4_000, 48_000, alone=False) is None  # the history is what grew too long
    assert too_long(detail, 40_000, 48_000, alone=False).startswith("This message is too long")
    assert too_long("Message 1 is 70,000", 70_000, 70_010, alone=True) == "This message is too long for the model."
    # the gateway's own check, on a paste too long at any count: in a conversation too, when it names this message
    chars = ("Message 3 is 70,000 characters long; the limit is 16,384 characters (8 per token of the model's "
             "2,048-token context). Shorten it or send it in parts.")
    assert too_long(chars, 70_000, 90_000, alone=False) == \
        "This message is too long for the model (70,000 characters; the limit is 16,384 characters)."
    assert too_long(chars, 5_000, 90_000, alone=False) is None  # an earlier message is the long one
