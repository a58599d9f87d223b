"""MCP tools in the window: the Settings → Tools page against the fixture server (paste a config,
its state and tools, tools off, remove), and a tool call in the chat as a card that asks before it
runs (scripted gateway, a toolbox without a server)."""

from __future__ import annotations

import json
from pathlib import Path

from mcp_servers import stdio_config
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from test_chat_page import idle, make_page
from tool_script import Box, Gateway

from desktop.chat.conversations import ConversationStore
from desktop.model.tool_render import call_text
from desktop.settings import Settings
from desktop.tools.manager import ToolManager
from desktop.ui.chat import ChatPage
from desktop.ui.settings_tools import ToolsPage

SHOTS = Path("/work/notes/shots")


def shot(widget, name: str) -> None:
    if SHOTS.is_dir():
        widget.grab().save(str(SHOTS / f"mcp-{name}.png"))


def test_tools_page_adds_a_pasted_server_shows_its_tools_and_removes_it(qtbot):
    manager = ToolManager(start_timeout_s=30)
    try:
        page = ToolsPage(Settings(), manager)
        qtbot.addWidget(page)
        page.resize(760, 620)
        page.show()
        page.paste.setPlainText("{not json")
        page.paste_button.click()
        assert "not valid JSON" in page.error.text() and page.servers == []
        cfg = stdio_config()
        page.paste.setPlainText(json.dumps({"mcpServers": {"fixture": {"command": cfg.command, "args": cfg.args}}}))
        page.paste_button.click()
        assert [s.name for s in page.servers] == ["fixture"] and page.paste.toPlainText() == ""
        assert page.tree.topLevelItem(0).text(1) == "Starts when you apply"
        page.name.setText("web")
        page.target.setText("http://127.0.0.1:9/mcp")
        page.extra.setText("Authorization: Bearer abc")
        page.add_button.click()
        assert page.servers[1].headers == {"Authorization": "Bearer abc"} and page.servers[1].transport == "http"
        manager.apply(page.servers)  # what Apply does (composition.apply_settings)
        qtbot.waitUntil(lambda: page.tree.topLevelItem(0).text(1) == "Ready: 5 tools", timeout=30_000)
        qtbot.waitUntil(lambda: page.tree.topLevelItem(1).text(1).startswith("Failed: "), timeout=30_000)
        item = page.tree.topLevelItem(0)
        assert {item.child(i).text(0) for i in range(item.childCount())} == {"add", "echo", "sleep", "fail", "crash"}
        shot(page, "settings-tools")
        page.tree.setCurrentItem(item)
        page.tree.setFocus()
        QTest.keyClick(page.tree, Qt.Key.Key_Space)  # its tools off, from the keyboard
        assert page.values()["mcp_servers"][0]["enabled"] is False
        qtbot.waitUntil(lambda: page.tree.topLevelItem(0).text(1).startswith("Off"))
        page.tree.setCurrentItem(page.tree.topLevelItem(1))
        shot(page, "settings-tools-failed")
        assert page.error.text().startswith("web: Failed: could not connect")  # the whole reason, selected
        page.restart_button.click()  # the failed one is tried again, and fails again, said in words
        qtbot.waitUntil(lambda: page.tree.topLevelItem(1).text(1).startswith("Failed: could not connect"), timeout=30_000)
        page.tree.setFocus()
        QTest.keyClick(page.tree, Qt.Key.Key_Delete)
        assert [s["name"] for s in page.values()["mcp_servers"]] == ["fixture"]
        Settings.model_validate(page.values())  # what the dialog saves is valid settings
    finally:
        manager.close()


CALL = "I will add them.\n" + call_text("add", json.dumps({"a": 2, "b": 3}))


def test_a_tool_call_shows_as_a_card_that_asks_before_it_runs(tmp_path, aloop, qtbot):
    settings = Settings(chat_tools=True)
    box = Box()
    gw = Gateway([CALL, "2 + 3 = 5."])
    page = ChatPage(gw, ConversationStore(tmp_path / "conversations"), lambda: settings,
                    tools=box)
    qtbot.addWidget(page)
    page.resize(1000, 640)
    page.show()
    assert page.tools_button.isChecked()
    page.composer.edit.setPlainText("What is 2 + 3?")
    QTest.keyClick(page.composer.edit, Qt.Key.Key_Return)

    def card():
        widgets = [w for w in page.view.widgets() if w.card is not None]
        return widgets[0].card if widgets else None

    aloop.run(_until(lambda: card() is not None and card().buttons.isVisible()))
    assert box.ran == [] and page.busy  # nothing runs before the user says so
    assert "add(a=2, b=3)" in card().title.text()
    assert page.view.widgets()[1].text() == "I will add them."  # the call shows as the card, not as text
    qtbot.wait(20)
    shot(page, "chat-card-asking")
    card().once.click()
    aloop.run(idle(page))
    assert box.ran == [("add", {"a": 2, "b": 3})]
    assert [m.role for m in page.conv.messages] == ["user", "assistant", "tool", "assistant"]
    assert page.conv.messages[-1].content == "2 + 3 = 5."
    assert json.loads(gw.sent[1][0]["tools"])[0]["function"]["name"] == "add"
    done = card()
    assert done.state.text().startswith("Done") and done.result.text() == "5"
    qtbot.wait(20)
    shot(page, "chat-card-done")
    page.open_conversation(page.conv.id)  # drawn again from the saved messages: the card stays
    assert card() is not None and card().result.text() == "5" and not card().buttons.isVisible()
    assert card().plain().startswith("add(a=2, b=3)\nDone")


def test_stop_denies_a_call_that_waits_and_nothing_runs(tmp_path, aloop, qtbot):
    settings = Settings(chat_tools=True)
    box = Box()
    page = ChatPage(Gateway([CALL, "Fine."]), ConversationStore(tmp_path / "conversations"), lambda: settings,
                    tools=box)
    qtbot.addWidget(page)
    page.show()
    page.composer.edit.setPlainText("What is 2 + 3?")
    QTest.keyClick(page.composer.edit, Qt.Key.Key_Return)
    aloop.run(_until(lambda: any(w.card is not None for w in page.view.widgets())))
    page.turns.stop(page.conv.id)  # the Stop button
    aloop.run(idle(page))
    assert box.ran == [] and not page.busy
    assert [m.role for m in page.conv.messages] == ["user", "assistant", "tool"]
    assert page.conv.messages[-1].call["decision"] == "deny"
    page.open_conversation(page.conv.id)
    (denied,) = [w.card for w in page.view.widgets() if w.card is not None]
    assert denied.state.text() == "Denied" and "did not allow" in denied.result.text()
    qtbot.wait(20)
    shot(page, "chat-card-denied")


def test_with_the_switch_off_no_tools_are_offered(tmp_path, aloop, qtbot):
    settings = Settings(chat_tools=False)
    gw = Gateway(["Hello."])
    page = ChatPage(gw, ConversationStore(tmp_path / "conversations"), lambda: settings, tools=Box())
    qtbot.addWidget(page)
    page.show()
    page.composer.edit.setPlainText("Hi")
    QTest.keyClick(page.composer.edit, Qt.Key.Key_Return)
    aloop.run(idle(page))
    assert "tools" not in gw.sent[0][0] and page.conv.messages[-1].content == "Hello."


async def _until(check, timeout: float = 10.0) -> None:
    import asyncio
    import time

    end = time.monotonic() + timeout
    while not check():
        if time.monotonic() > end:
            raise AssertionError("timed out")
        await asyncio.sleep(0.01)
