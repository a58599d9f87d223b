"""Issue 19, new-user item 4: an edit is a branch inside the same conversation, switched with the
‹ › on the edited message (as Regenerate's versions are on a reply), not a second conversation with
the same title. On the tiny model: edit twice, switch, restart, the history the gateway receives;
a failed edit leaves the conversation as it was, with the edit back in the text box."""

from __future__ import annotations

import json

import pytest

from desktop.chat.conversations import ConversationStore
from desktop.protocol import ErrorEvent
from desktop.settings import Settings
from desktop.ui.chat import ChatPage
from test_chat_page import Tap, idle, make_page, say

pytestmark = pytest.mark.hardening


@pytest.fixture
def gateway(two_slot_gateway):
    return two_slot_gateway


@pytest.fixture
def settings() -> Settings:
    return Settings(temperature=0.0, max_tokens=8)


def texts(page: ChatPage) -> list[str]:
    return [w.text() for w in page.view.widgets()]


def switcher(page: ChatPage, i: int) -> str:
    w = page.view.widgets()[i]
    return w.version_label.text() if w.version_label.isVisibleTo(w) else ""


def edit(page: ChatPage, aloop, index: int, text: str) -> None:
    page.view.widgets()[index].edit_button.click()
    assert page.composer.editing
    aloop.run(say(page, text))


def test_edits_are_branches_switched_on_the_message_and_kept_across_a_restart(gateway, tmp_path, settings, aloop,
                                                                              qtbot, screenshot):
    page = make_page(gateway, tmp_path, settings, qtbot)
    page.gateway = tap = Tap(gateway, lambda _event: None)
    aloop.run(say(page, "First question"))
    aloop.run(say(page, "Second question"))
    conv_id, title = page.current_conversation_id, page.conv.title
    original = texts(page)
    edit(page, aloop, 2, "Second question, edited")
    edited = texts(page)
    edit(page, aloop, 2, "Second question, again")
    again = texts(page)
    assert edited[:3] == original[:2] + ["Second question, edited"] and len(edited) == 4
    assert again[:3] == original[:2] + ["Second question, again"] and len(again) == 4
    assert [c.id for c in page.store.list()] == [conv_id] and page.conv.title == title  # one conversation
    assert page.conversations.model.rowCount() == 1
    assert switcher(page, 2) == "3/3" and switcher(page, 0) == "" and switcher(page, 3) == ""
    w = page.view.widgets()[2]
    assert w.previous_version.toolTip() == "Previous branch" and w.version_label.accessibleName() == "Branch 3 of 3"
    assert w.previous_version.isEnabled() and not w.next_version.isEnabled()

    w.previous_version.click()
    assert texts(page) == edited and switcher(page, 2) == "2/3"
    qtbot.wait(30)
    path = screenshot(page, "chat-edit-branches")
    page.view.widgets()[2].grab().save(str(path.with_name("chat-edit-branches-message.png")))
    page.view.widgets()[2].previous_version.click()
    assert texts(page) == original and switcher(page, 2) == "1/3"
    assert not page.view.widgets()[2].previous_version.isEnabled()
    on_disk = json.loads((page.store.root / f"{conv_id}.json").read_text())["messages"]
    assert on_disk[2]["content"] == "Second question" and on_disk[2]["branch"] == 0 and len(on_disk) == 4

    back = make_page(tap, tmp_path, settings, qtbot)  # a restart: a new page on the files
    assert back.open_conversation(conv_id)
    assert texts(back) == original and switcher(back, 2) == "1/3"
    aloop.run(say(back, "Go on"))  # the next turn continues from the branch shown
    sent = [m["content"] for m in tap.sent[-1]]
    assert sent[-5:] == original + ["Go on"] and "Second question, again" not in sent
    assert back.conv.messages[-1].stats["cached_tokens"] > 0
    back.view.widgets()[2].next_version.click()
    back.view.widgets()[2].next_version.click()
    assert texts(back) == again and switcher(back, 2) == "3/3"  # the other branches untouched
    back.view.widgets()[2].previous_version.click()
    back.view.widgets()[2].previous_version.click()
    assert texts(back)[:5] == original + ["Go on"]  # and the original one kept its new turn
    qtbot.wait(20)  # the switched-out bubbles are deleted while a window is open (else the last one to go quits the app)


def test_a_failed_edit_leaves_the_conversation_as_it_was(tmp_path, qtbot, aloop, screenshot):
    from test_chat_screens import Scripted

    page = make_page(Scripted(), tmp_path, Settings(), qtbot)
    for text in ("One", "Two"):
        page.send(text)
        aloop.run(idle(page))
    path = page.store.root / f"{page.current_conversation_id}.json"
    before, shown = path.read_text(), texts(page)
    page.edit(2)
    page.gateway.fail_next = ErrorEvent("x", "worker_crashed", "Worker w0 stopped.", True)
    page.composer.edit.setPlainText("Two, edited")
    page.composer.submit()
    aloop.run(idle(page))
    assert texts(page) == shown and switcher(page, 2) == "" and len(page.conv.messages) == 4
    now, then = json.loads(path.read_text()), json.loads(before)
    assert {**now, "updated": 0} == {**then, "updated": 0}  # on disk too (saved again: a later time)
    assert page.composer.editing and page.composer.edit.toPlainText() == "Two, edited"  # nothing lost
    notice = page.view.notice()
    assert notice is not None and "is back in the text box" in notice.label.text()
    assert not notice.retry_button.isVisibleTo(page)
    qtbot.wait(30)
    screenshot(page, "chat-edit-failed")
    page.composer.submit()  # sent again, it works: the branch is made now
    aloop.run(idle(page))
    assert texts(page)[2] == "Two, edited" and switcher(page, 2) == "2/2" and page.view.notice() is None
    assert ConversationStore(page.store.root).get(page.current_conversation_id).messages[2].branch == 1


def test_an_edit_that_cannot_be_saved_changes_nothing(tmp_path, qtbot, aloop, monkeypatch):
    from test_chat_screens import Scripted

    page = make_page(Scripted(), tmp_path, Settings(), qtbot)
    page.send("One")
    aloop.run(idle(page))
    shown, sent = texts(page), len(page.gateway.sent)
    page.edit(0)

    def full(_conv):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(page.store, "save", full)
    page.composer.edit.setPlainText("One, edited")
    page.composer.submit()
    aloop.run(idle(page))
    assert texts(page) == shown and [m.content for m in page.conv.messages] == shown
    assert page.conv.messages[0].branches == [] and len(page.gateway.sent) == sent
    assert page.composer.edit.toPlainText() == "One, edited"


def test_an_edit_that_fails_while_another_conversation_is_shown_comes_back_there(tmp_path, qtbot, aloop):
    from test_chat_screens import Scripted

    page = make_page(Scripted(), tmp_path, Settings(), qtbot)
    page.send("One")
    aloop.run(idle(page))
    conv_id, shown = page.current_conversation_id, texts(page)
    page.edit(0)
    page.gateway.fail_next = ErrorEvent("x", "worker_crashed", "Worker w0 stopped.", True)
    page.send("One, edited")
    page.new_conversation()  # away before the reply fails
    aloop.run(idle(page))
    assert page.composer.edit.toPlainText() == "" and not page.composer.editing
    assert page.open_conversation(conv_id)
    assert texts(page) == shown and page.conv.messages[0].branches == []
    assert page.composer.editing and page.composer.edit.toPlainText() == "One, edited"  # nothing lost
    assert "back in the text box" in page.view.notice().label.text()
