"""Issue 19, new-user item 8 (the call part) in the window: when a call ends, the chat list shows
it as "Call · <first words>" at once, the Call page says where it went, and opening it in Chat
shows the turns as heard, ready to be continued by typing."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from PySide6.QtWidgets import QApplication

from desktop.composition import Composition
from desktop.call.call import TurnMetrics
from desktop.settings import Settings
from desktop.ui.call.page import CallPage
from desktop.ui.chat.page import ChatPage

pytestmark = pytest.mark.hardening


def _titles(page: ChatPage) -> list[str]:
    model = page.conversations.model
    return [model.data(model.index(i, 0)) for i in range(model.rowCount())]


def test_an_ended_call_shows_up_in_the_chat_list(tmp_path, monkeypatch, qapp, aloop, qtbot, screenshot):
    for name in ("CONFIG", "DATA", "LOG"):
        monkeypatch.setenv(f"OMNIDESK_{name}_DIR", str(tmp_path / name.lower()))
    comp = Composition(qapp, Settings(model_source="tiny"), settings_path=tmp_path / "config" / "settings.json")
    comp.start()
    try:
        aloop.run(comp.wait_ready(60))
        chat, call_page = comp.chat_page, comp.call_page
        assert isinstance(chat, ChatPage) and isinstance(call_page, CallPage)
        factory = call_page._start_call.__self__  # the CallFactory the page starts calls with
        assert factory.store is chat.store
        ended = SimpleNamespace(system="You are a helpful voice assistant.", turns=[
            TurnMetrics(1, user_text="What is the capital of France?", assistant_text="The capital of France is Paris, "
                        "a city on the Seine.", heard="The capital of France is Paris"),
            TurnMetrics(2, user_text="And of Italy?", assistant_text="Rome.")])
        comp.window.show_page("call")
        factory._save(ended)  # what the call's "ended" event does
        qtbot.waitUntil(lambda: "It is in Chat" in call_page.notice.text, timeout=3000)
        assert "Call · What is the capital of France?" in call_page.notice.text
        screenshot(comp.window, "call_saved_notice")
        assert _titles(chat)[0] == "Call · What is the capital of France?"
        conv = chat.store.list()[0]
        comp.window.show_page("chat")
        assert chat.open_conversation(conv.id)
        QApplication.processEvents()
        assert [m.content for m in chat.conv.messages] == ["What is the capital of France?",
                                                           "The capital of France is Paris", "And of Italy?", "Rome."]
        screenshot(comp.window, "call_saved_in_chat")
    finally:
        aloop.run(comp.shutdown(), 30)
