"""Issue 22 §2 in the chat: a conversation longer than the model's window (the tiny model's made
small) goes on; the meter says how full the window is and a divider marks the first message the
model still sees; nothing is deleted from the conversation. "Stop and tell me" refuses instead."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from desktop.chat.conversations import ConversationStore
from desktop.settings import Settings
from desktop.ui.chat import ChatPage
from desktop.ui.chat.window_view import MARK_TEXT
from desktop.workers.config import WorkerConfig
from ui_helpers import start_gateway

WINDOW = 512
SHOTS = Path("/work/notes/shots")


@pytest.fixture
def small_gateway(aloop, monkeypatch):
    import desktop.model.loader as loader

    monkeypatch.setattr(loader, "context_length", lambda config: WINDOW)
    gw = start_gateway(aloop, WorkerConfig(num_slots=2))
    assert gw.context_length() == WINDOW
    yield gw
    aloop.run(gw.close())


def make_page(gw, root, settings: Settings, qtbot) -> ChatPage:
    page = ChatPage(gw, ConversationStore(root / "conversations"), lambda: settings)
    qtbot.addWidget(page)
    page.resize(900, 760)
    page.show()
    return page


async def say(page: ChatPage, text: str) -> None:
    page.composer.edit.setPlainText(text)
    page.send(text, [])
    while page.busy or len(page.tasks):
        await asyncio.sleep(0.005)


def test_a_long_conversation_slides_shows_the_meter_and_marks_the_first_message_seen(small_gateway, aloop, tmp_path, qtbot):
    settings = Settings(temperature=0.0, max_tokens=12)
    page = make_page(small_gateway, tmp_path, settings, qtbot)
    for n in range(12):
        aloop.run(say(page, f"Tell me about fox number {n}, the quick brown one that jumps."))
        notice = page.view.notice()
        assert notice is None, (n, notice.label.text(), notice.detail.text())
    conv = page.store.get(page.current_conversation_id)
    assert len(conv.messages) == 24 and all(m.content for m in conv.messages)  # nothing deleted
    last = conv.messages[-1].stats
    views = [m.stats.get("first_seen", 0) for m in conv.messages if m.role == "assistant"]
    slides = sum(1 for m in conv.messages if m.role == "assistant" and m.stats.get("slid"))
    assert 1 <= slides < sum(1 for v in views if v)  # some turns after the first slide were cheap deltas
    first = last["first_seen"]
    assert first > 0 and conv.messages[first].role == "user"
    assert page.meter.isVisible() and page.meter.text().endswith(f"/ {WINDOW} tokens")
    used = int(page.meter.text().split("/")[0].replace(",", ""))
    assert used == last["input_tokens"] + last["generated_tokens"] <= WINDOW
    mark = page.view.window_mark
    assert mark.isVisible() and mark.label.text() == MARK_TEXT
    widget = page.view.widget_at(first)
    assert widget is not None and mark.y() < widget.y()
    above = page.view.widget_at(first - 1)
    assert above is None or above.y() < mark.y()
    page.view.verticalScrollBar().setValue(max(mark.y() - 200, 0))
    qtbot.wait(50)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.grab().save(str(SHOTS / "slide-chat.png"))
    # reopened, the marks come back from the saved stats
    page2 = make_page(small_gateway, tmp_path, settings, qtbot)
    assert page2.open_conversation(conv.id) and page2.view.window_mark.isVisible() and page2.meter.isVisible()


def test_stop_and_tell_me_refuses_once_the_prompt_passes_the_window(small_gateway, aloop, tmp_path, qtbot):
    settings = Settings(temperature=0.0, max_tokens=12, context_overflow="stop")
    page = make_page(small_gateway, tmp_path, settings, qtbot)
    for n in range(14):
        aloop.run(say(page, f"Tell me about fox number {n}, the quick brown one that jumps."))
        if page.view.notice() is not None:
            break
    assert page.view.notice() is not None and not page.view.window_mark.isVisible()
