"""Regenerate keeps the earlier replies, on the tiny model (temperature 1, no seed: each Regenerate
writes another reply): "‹ 3/3 ›" in the last reply's header goes through them with their own stats,
the next turn goes on from the version shown, and the versions survive a restart."""

from __future__ import annotations

import json

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from desktop.chat.conversations import ConversationStore
from desktop.chat.reply_versions import count
from desktop.protocol import ChunkEvent
from desktop.settings import Settings
from desktop.ui.chat import ChatPage
from test_chat_page import Tap, idle, make_page, say


@pytest.fixture
def gateway(two_slot_gateway):
    return two_slot_gateway


@pytest.fixture
def settings() -> Settings:
    return Settings(temperature=1.0, max_tokens=12)


def shown(page: ChatPage) -> tuple[str, str, str]:
    """The last reply's text, its stats line and its switcher's label (hidden: "")."""
    w = page.view.widgets()[-1]
    return w.text(), w.badge.text(), w.version_label.text() if w.version_label.isVisibleTo(w) else ""


def test_regenerate_keeps_versions_to_go_back_to(gateway, tmp_path, settings, aloop, qtbot, screenshot):
    page = make_page(gateway, tmp_path, settings, qtbot)
    during: list[tuple[str, bool, bool]] = []  # while a reply streams: the switcher's label and buttons

    def look(event) -> None:
        w = page.view.widgets()[-1]
        if isinstance(event, ChunkEvent) and w.role == "assistant" and w.version_label.isVisible():
            during.append((w.version_label.text(), w.previous_version.isEnabled(), w.next_version.isEnabled()))

    page.gateway = tap = Tap(gateway, look)
    aloop.run(say(page, "Hello there"))
    assert shown(page)[2] == ""  # one version: no switcher
    versions = [shown(page)[:2]]
    for _ in range(2):
        page.view.widgets()[-1].regenerate_button.click()
        aloop.run(idle(page))
        versions.append(shown(page)[:2])
    assert len({text for text, _ in versions}) == 3, versions  # three different replies
    assert {d[0] for d in during} == {"2/2", "3/3"} and not any(d[1] or d[2] for d in during)  # waits while streaming
    reply = page.view.widgets()[-1]
    assert shown(page) == (*versions[2], "3/3")
    assert reply.previous_version.isEnabled() and not reply.next_version.isEnabled()
    assert reply.previous_version.toolTip() == "Previous version" == reply.previous_version.accessibleName()
    assert reply.next_version.toolTip() == "Next version" == reply.next_version.accessibleName()
    assert reply.version_label.accessibleName() == "Version 3 of 3"

    reply.previous_version.click()
    assert shown(page) == (*versions[1], "2/3") and reply.next_version.isEnabled()
    conv_id = page.current_conversation_id
    saved = ConversationStore(page.store.root).get(conv_id).messages[-1]  # as on disk
    assert saved.content == versions[1][0] and saved.shown == 1 and count(saved) == 3
    assert [v.content for v in saved.versions] == [versions[0][0], versions[2][0]]
    path = screenshot(page, "chat-reply-versions")
    page.view.widgets()[-1].grab().save(str(path.with_name("chat-reply-versions-header.png")))

    again = make_page(tap, tmp_path, settings, qtbot)  # a restart: a new page on the files
    assert again.open_conversation(conv_id)
    assert shown(again) == (*versions[1], "2/3")
    again.view.widgets()[-1].next_version.click()
    assert shown(again) == (*versions[2], "3/3")
    again.view.widgets()[-1].previous_version.click()
    again.view.widgets()[-1].previous_version.click()
    assert shown(again) == (*versions[0], "1/3") and not again.view.widgets()[-1].previous_version.isEnabled()
    again.view.widgets()[-1].next_version.click()

    aloop.run(say(again, "Go on"))  # the conversation goes on from the version shown
    assert tap.sent[-1][-2:] == [{"role": "assistant", "content": versions[1][0]}, {"role": "user", "content": "Go on"}]
    earlier = again.view.widgets()[1]
    assert not earlier.version_label.isVisibleTo(earlier) and not earlier.previous_version.isVisibleTo(earlier)  # only on the last reply
    kept = again.store.get(conv_id).messages[1]
    assert kept.content == versions[1][0] and count(kept) == 3  # the others are still kept


def test_an_old_conversation_without_versions_shows_no_switcher_until_regenerated(gateway, tmp_path, settings,
                                                                                 aloop, qtbot):
    root = tmp_path / "conversations"
    root.mkdir()
    old = {"version": 1, "id": "old1", "title": "Old", "created": 1.7e9, "updated": 1.7e9,
           "messages": [{"role": "user", "content": "Hi", "created": 1.7e9},
                        {"role": "assistant", "content": "Hello from before", "created": 1.7e9,
                         "stats": {"generated_tokens": 3, "prompt_tokens": 5}}]}
    (root / "old1.json").write_text(json.dumps(old))
    page = make_page(gateway, tmp_path, settings, qtbot)
    assert page.open_conversation("old1")
    reply = page.view.widgets()[-1]
    assert reply.text() == "Hello from before" and reply.regenerate_button.isVisibleTo(reply)
    assert not reply.version_label.isVisibleTo(reply) and not reply.previous_version.isVisibleTo(reply)
    reply.regenerate_button.click()
    aloop.run(idle(page))
    assert shown(page)[2] == "2/2"
    QTest.mouseClick(page.view.widgets()[-1].previous_version, Qt.MouseButton.LeftButton)
    assert shown(page)[:1] == ("Hello from before",) and shown(page)[2] == "1/2"


def test_a_failed_regenerate_leaves_the_versions_as_they_were(tmp_path, qtbot, aloop):
    from desktop.protocol import ErrorEvent
    from test_chat_screens import Scripted

    page = make_page(Scripted(), tmp_path, Settings(), qtbot)
    page.send("Hello")
    aloop.run(idle(page))
    page.regenerate()
    aloop.run(idle(page))
    page.view.widgets()[-1].previous_version.click()
    before = page.conv.messages[-1]
    assert shown(page)[2] == "1/2"
    page.gateway.fail_next = ErrorEvent("x", "worker_crashed", "Worker w0 stopped.", True)
    page.regenerate()
    aloop.run(idle(page))
    saved = ConversationStore(page.store.root).get(page.current_conversation_id).messages[-1]
    assert page.conv.messages[-1] is before and shown(page)[2] == "1/2"
    assert saved.shown == 0 and count(saved) == 2 and page.view.notice() is not None
