"""Issue 8, item 11 in the window: a conversation file that cannot be used leaves the chat page
working with the other conversations, and the user is told where the bad file was moved."""

from __future__ import annotations

import json

import pytest
from PySide6.QtWidgets import QMessageBox

from desktop.composition import Composition
from desktop.chat.conversations import ConversationStore, StoredMessage
from desktop.settings import Settings
from desktop.ui.chat.page import ChatPage

pytestmark = pytest.mark.hardening


def test_bad_conversation_files_leave_the_chat_page_working(tmp_path, monkeypatch, qapp, aloop, qtbot, screenshot):
    for name in ("CONFIG", "DATA", "LOG"):
        monkeypatch.setenv(f"OMNIDESK_{name}_DIR", str(tmp_path / name.lower()))
    root = tmp_path / "data" / "conversations"
    store = ConversationStore(root)
    good = store.new()
    good.messages.append(StoredMessage("user", "still here"))
    store.save(good)
    (root / "nullcreated.json").write_text(json.dumps({"id": "nullcreated", "created": None, "messages": []}))
    (root / "nested.json").write_text('{"id": "nested", "messages": ' + "[" * 50_000 + "]" * 50_000 + "}")

    comp = Composition(qapp, Settings(model_source="tiny"), settings_path=tmp_path / "config" / "settings.json")
    comp.start()
    try:
        aloop.run(comp.wait_ready(60))
        page = comp.chat_page
        assert isinstance(page, ChatPage)  # not the "Chat is unavailable" stand-in
        assert {c.id for c in page.store.list()} == {good.id, "nullcreated"}
        boxes = [w for w in comp.window.findChildren(QMessageBox) if w.isVisible()]
        assert len(boxes) == 1
        text = boxes[0].text()
        assert "nested.json" in text and "nested too deeply" in text and str(root / "set-aside") in text
        screenshot(boxes[0], "hardening_store_notice")
        boxes[0].accept()
    finally:
        aloop.run(comp.shutdown(), 30)
