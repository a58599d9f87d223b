"""Chat page pictures and the system-prompt presets, on a scripted gateway that streams readable
Markdown (the tiny test model writes gibberish): screenshots land in test-artifacts/."""

from __future__ import annotations

import asyncio
import sys

import pytest

from desktop.chat.conversations import ConversationStore, StoredMessage
from desktop.chat.presets import PresetStore
from desktop.protocol import ChunkEvent, Done, ErrorEvent, PrefillDone, TokenStats
from desktop.errors import OmnideskError, QueueFullError
from desktop.settings import Settings
from desktop.ui.chat import ChatPage

REPLY = """Here is a small function that reverses the words of a sentence:

```python
def reverse_words(text: str) -> str:
    return " ".join(reversed(text.split()))
```

It splits on **any whitespace**, so `"a  b"` becomes `"b a"`."""
FIRST = ("A **KV cache** keeps the attention keys and values of the tokens the model has already read, "
         "so a new turn only has to process the *new* message:\n\n- replies start sooner\n- less work for your CPU or GPU")
FIRST_STATS = {"input_tokens": 38, "cached_tokens": 18, "generated_tokens": 42, "kind": "spc",
               "miss_reason": "new conversation", "ttft_ms": 61.0, "decode_ms": 2900.0, "finish_reason": "eos"}


class Stream:
    def __init__(self, request_id: str, events) -> None:
        self.request_id, self.events = request_id, events

    def __aiter__(self):
        return self.events


class Scripted:
    """A gateway that answers every turn with REPLY, word by word, as a cache hit."""

    def __init__(self) -> None:
        self.sent: list[list[dict]] = []
        self.fail_next: Exception | ErrorEvent | None = None

    def chat(self, messages, params, request_id=None, **kw):
        self.sent.append(list(messages))
        failure, self.fail_next = self.fail_next, None
        if isinstance(failure, Exception):
            raise failure
        if failure is not None:
            return Stream(failure.request_id, self._fail(failure))
        return Stream(f"r{len(self.sent)}", self._events(f"r{len(self.sent)}"))

    async def _events(self, rid: str):
        yield PrefillDone(rid, 450, 412, "extend", 12.0, 0)
        for word in REPLY.split(" "):
            yield ChunkEvent(rid, word + " ")
            await asyncio.sleep(0)
        yield Done(rid, REPLY, TokenStats(450, 412, 60, "extend", "", 12.0, 85.0, 4155.0, 0.0, "eos"))

    async def _fail(self, event: ErrorEvent):
        yield event

    async def cancel(self, request_id: str) -> None:
        pass


async def idle(page: ChatPage) -> None:
    while page.busy or len(page.tasks):
        await asyncio.sleep(0.005)
    await asyncio.sleep(0.05)  # let the layout settle before a picture


@pytest.fixture
def store(tmp_path) -> ConversationStore:
    store = ConversationStore(tmp_path / "conversations")
    for text in ("Plan a weekend in Lisbon", "Translate a letter into French for my landlord"):
        conv = store.new()
        conv.messages = [StoredMessage("user", text)]
        store.save(conv)
    return store


def make_page(store, settings: Settings, qtbot) -> ChatPage:
    page = ChatPage(Scripted(), store, lambda: settings, presets=PresetStore(store.root.parent))
    qtbot.addWidget(page)
    page.resize(1100, 720)
    page.show()
    return page


def test_a_short_conversation_with_badges(store, qtbot, aloop, screenshot):
    conv = store.new(PresetStore(store.root.parent).get("assistant").prompt, "assistant")
    conv.messages = [StoredMessage("user", "What is a KV cache?"), StoredMessage("assistant", FIRST, FIRST_STATS)]
    store.save(conv)
    page = make_page(store, Settings(last_conversation_id=conv.id), qtbot)
    page.composer.edit.setPlainText("Write a function that reverses the words of a sentence")
    page.composer.submit()
    aloop.run(idle(page))
    badges = [w.badge.text() for w in page.view.widgets() if w.role == "assistant"]
    assert badges == ["cached 18 / new 20 tokens · TTFT 61 ms · 14.1 tok/s · new conversation",
                      "cached 412 / new 38 tokens · TTFT 85 ms · 14.2 tok/s · history cached"]
    assert "reverse_words" in page.view.widgets()[-1].body.toPlainText()
    assert page.preset_bar.fixed.text() == "<b>Assistant</b>" and page.preset_bar.combo.isHidden()
    screenshot(page, "chat-conversation")


def test_a_new_conversation_takes_the_chosen_preset(store, qtbot, aloop, screenshot):
    page = make_page(store, Settings(system_preset="tutor"), qtbot)
    bar = page.preset_bar
    assert bar.combo.currentData() == "tutor" and page.conv.preset == "tutor"
    bar.combo.setCurrentIndex(bar.combo.findData("coder"))
    bar.combo.activated.emit(bar.combo.currentIndex())  # as a user's pick does
    bar.toggle.setChecked(True)
    assert bar.editor.isVisible() and bar.editor.toPlainText().startswith("You are an expert programmer")
    aloop.run(asyncio.sleep(0.05))
    screenshot(page, "chat-new-conversation")
    bar.editor.setPlainText("You only answer in haiku.")
    assert page.conv.preset == "" and bar.state.text() == "edited"
    bar.name.setText("Haiku")
    bar.save_button.click()
    assert PresetStore(store.root.parent).get("user-haiku").prompt == "You only answer in haiku."
    assert page.conv.preset == "user-haiku" and bar.delete_button.isVisible()
    page.composer.edit.setPlainText("Tell me about autumn")
    page.composer.submit()
    aloop.run(idle(page))
    assert page.gateway.sent[-1][0] == {"role": "system", "content": "You only answer in haiku."}
    saved = page.store.get(page.current_conversation_id)
    assert saved.preset == "user-haiku" and saved.system_prompt == "You only answer in haiku."
    assert not bar.editor.isVisible() or bar.editor.isReadOnly()
    assert bar.fixed.text() == "<b>Haiku</b>"


def test_a_failed_regenerate_brings_the_old_reply_back(store, qtbot, aloop):
    page = make_page(store, Settings(), qtbot)
    page.composer.edit.setPlainText("Hello")
    page.composer.submit()
    aloop.run(idle(page))
    old = page.store.get(page.current_conversation_id).messages[-1]
    page.gateway.fail_next = ErrorEvent("x", "worker_crashed", "Worker w0 stopped.", True)
    page.view.widgets()[-1].regenerate_button.click()
    aloop.run(idle(page))
    assert page.store.get(page.current_conversation_id).messages[-1] is old
    assert [w.role for w in page.view.widgets()] == ["user", "assistant"] and page.view.widgets()[-1].text() == REPLY
    page.view.notice().retry_button.click()  # Retry after a failed Regenerate regenerates again
    aloop.run(idle(page))
    assert page.view.notice() is None and page.store.get(page.current_conversation_id).messages[-1] is not old
    assert [m["role"] for m in page.gateway.sent[-1]] == ["system", "user"]


def test_refusals_and_bugs_never_leave_the_page_stuck(store, qtbot, aloop, monkeypatch):
    page = make_page(store, Settings(), qtbot)
    page.gateway.fail_next = QueueFullError("The queue is full (64 waiting).")
    page.send("One")
    aloop.run(idle(page))
    assert "Too many requests" in page.view.notice().label.text() and page.view.notice().retry_button.isVisible()
    reported = []
    monkeypatch.setattr(sys, "excepthook", lambda *exc: reported.append(exc[1]))
    page.gateway.fail_next = RuntimeError("a bug")
    page.view.notice().retry_button.click()
    aloop.run(idle(page))
    assert [str(e) for e in reported] == ["a bug"]  # reported, not swallowed
    assert not page.busy and page.composer.send_button.text() == "Send"
    assert "went wrong" in page.view.notice().label.text()
    assert [m.content for m in page.store.get(page.current_conversation_id).messages] == ["One"]


def test_a_message_sent_while_the_model_loads_waits_for_it(store, qtbot, aloop):
    page = make_page(store, Settings(), qtbot)
    scripted, loading = page.gateway, [True]

    class Loading:  # like the app's gateway proxy before the model is up
        def __getattr__(self, name):
            if loading[0]:
                raise OmnideskError("The model is not running yet; try again in a moment.", code="not_ready", retryable=True)
            return getattr(scripted, name)

    page.gateway = Loading()

    async def scenario() -> None:
        page.send("Are you there?")
        while page.queue_banner.isHidden():
            await asyncio.sleep(0.01)
        assert "finish loading" in page.queue_banner.label.text() and page.busy
        loading[0] = False
        await idle(page)

    aloop.run(scenario(), timeout=10)
    assert page.queue_banner.isHidden() and page.view.widgets()[-1].text() == REPLY
    loading[0] = True
    page.send("Again?")
    page.stop()
    aloop.run(idle(page))
    assert "left the queue" in page.view.notice().label.text() and not page.busy
