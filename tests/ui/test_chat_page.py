"""The chat page on a real gateway over the tiny model: streaming, badges, Stop, Regenerate,
Edit → branch with a cache hit, persistence across restarts, and the queued state."""

from __future__ import annotations

import asyncio

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from desktop.chat.conversations import ConversationStore
from desktop.gateway.gateway import Gateway
from desktop.protocol import ChunkEvent, Done, ErrorEvent
from desktop.model.messages import Message
from desktop.model.params import SamplingParams
from desktop.settings import Settings
from desktop.ui.chat import ChatPage
from desktop.workers.config import WorkerConfig
from ui_helpers import start_gateway as _start


def start_gateway(aloop, slots: int = 4) -> Gateway:
    return _start(aloop, WorkerConfig(num_slots=slots))


@pytest.fixture
def gateway(aloop):
    gw = start_gateway(aloop)
    yield gw
    aloop.run(gw.close())


@pytest.fixture
def settings() -> Settings:
    return Settings(temperature=0.0, max_tokens=24)


def make_page(gw, root, settings: Settings, qtbot) -> ChatPage:
    page = ChatPage(gw, ConversationStore(root / "conversations"), lambda: settings)
    qtbot.addWidget(page)
    page.resize(1100, 720)
    page.show()
    return page


@pytest.fixture
def page(gateway, tmp_path, settings, qtbot) -> ChatPage:
    return make_page(gateway, tmp_path, settings, qtbot)


async def idle(page: ChatPage) -> None:
    while page.busy or len(page.tasks):
        await asyncio.sleep(0.005)


async def say(page: ChatPage, text: str) -> None:
    page.composer.edit.setPlainText(text)
    QTest.keyClick(page.composer.edit, Qt.Key.Key_Return)
    await idle(page)


class Tap:
    """The real gateway, with a look at the page before each event reaches it."""

    def __init__(self, gw: Gateway, look) -> None:
        self.gw, self.look, self.sent = gw, look, []

    def chat(self, messages, params, request_id=None, **kw):
        self.sent.append(messages)
        return TapStream(self.gw.chat(messages, params, request_id=request_id), self.look)

    async def cancel(self, request_id: str) -> None:
        await self.gw.cancel(request_id)


class TapStream:
    def __init__(self, stream, look) -> None:
        self.stream, self.look, self.request_id = stream, look, stream.request_id

    def __aiter__(self):
        return self

    async def __anext__(self):
        event = await self.stream.__anext__()
        self.look(event)
        return event


def test_a_reply_streams_into_the_view_and_its_badge_counts_tokens(page, aloop):
    seen: list[tuple[str, str]] = []  # (event about to be handled, reply text shown at that moment)

    def look(event) -> None:
        widgets = page.view.widgets()
        shown = widgets[-1].body.toPlainText() if widgets and widgets[-1].role == "assistant" else ""
        seen.append((type(event).__name__, shown))

    page.gateway = Tap(page.gateway, look)
    aloop.run(say(page, "Say something long"))
    before_done = [shown for name, shown in seen if name in ("ChunkEvent", "Done")]
    growing = [t for t in before_done if t]
    assert len(set(growing)) >= 2, f"the reply did not grow across chunks: {seen}"
    assert all(a == b[: len(a)] for a, b in zip(growing, growing[1:]))
    reply = page.view.widgets()[-1]
    assert reply.role == "assistant" and reply.text() and reply.body.toPlainText() == growing[-1]
    assert reply.badge.isVisible() and reply.badge.text().startswith("cached ")
    assert "new conversation" in reply.badge.text() and "tok/s" in reply.badge.text()
    conv = page.store.get(page.current_conversation_id)
    assert [m.role for m in conv.messages] == ["user", "assistant"]
    assert conv.messages[1].stats["generated_tokens"] == 24 and conv.title == "Say something long"
    aloop.run(say(page, "And more"))
    assert page.view.widgets()[-1].badge.text().startswith("cached ")
    stats = page.store.get(conv.id).messages[-1].stats
    assert stats["kind"] == "extend" and stats["cached_tokens"] > 0


def test_stop_keeps_the_partial_reply(page, aloop, settings):
    settings.max_tokens = 5000

    async def scenario() -> None:
        page.composer.edit.setPlainText("Tell me a very long story")
        page.composer.submit()
        assert page.composer.send_button.text() == "Stop"
        while not (page.view.widgets()[-1].role == "assistant" and page.view.widgets()[-1].text()):
            await asyncio.sleep(0.002)
        QTest.keyClick(page.composer.edit, Qt.Key.Key_Escape)
        await idle(page)

    aloop.run(scenario(), timeout=30)
    assert page.composer.send_button.text() == "Send"
    conv = ConversationStore(page.store.root).get(page.current_conversation_id)  # as saved on disk
    reply = conv.messages[-1]
    assert reply.role == "assistant" and reply.content
    assert reply.stats["finish_reason"] in ("stopped", "cancelled") and reply.stats["generated_tokens"] < 5000
    assert page.view.widgets()[-1].text() == reply.content and "stopped" in page.view.widgets()[-1].badge.text()


def test_closing_the_page_mid_reply_keeps_what_was_written_as_interrupted(page, aloop, settings):
    settings.max_tokens = 5000

    async def scenario() -> None:
        page.send("Tell me a very long story")
        while not (page.view.widgets()[-1].role == "assistant" and page.view.widgets()[-1].text()):
            await asyncio.sleep(0.002)
        first = page.current_conversation_id
        page.new_conversation()  # the reply goes on meanwhile
        assert not page.busy and page.view.widgets() == [] and page.turns.of(first) is not None
        await page.shutdown()  # the app closes (or the model is reloaded)
        reply = ConversationStore(page.store.root).get(first).messages[-1]
        assert reply.role == "assistant" and reply.content and reply.stats["finish_reason"] in ("stopped", "cancelled")
        assert reply.status == "interrupted"  # it can be continued after the restart
        assert page.view.widgets() == []  # the reply of a conversation not shown never touches the view

    aloop.run(scenario(), timeout=30)


def test_regenerate_replaces_the_last_reply(page, aloop):
    page.gateway = tap = Tap(page.gateway, lambda e: None)
    aloop.run(say(page, "Hello there"))
    first = page.store.get(page.current_conversation_id).messages[-1]
    last = page.view.widgets()[-1]
    assert last.regenerate_button.isVisible() and not page.view.widgets()[0].regenerate_button.isVisible()
    last.regenerate_button.click()
    aloop.run(idle(page))
    sent = tap.sent[-1]
    assert [m["role"] for m in sent] == ["system", "user"]  # the old reply was not sent back
    conv = page.store.get(page.current_conversation_id)
    assert [m.role for m in conv.messages] == ["user", "assistant"] and conv.messages[-1] is not first
    assert len(page.view.widgets()) == 2 and page.view.widgets()[-1].text() == conv.messages[-1].content
    assert conv.messages[-1].stats["cached_tokens"] > 0  # the prompt was still cached


def test_editing_an_earlier_message_branches_and_reuses_the_cache(page, aloop):
    aloop.run(say(page, "First question"))
    aloop.run(say(page, "Second question"))
    original = page.current_conversation_id
    changed = []
    page.conversation_changed.connect(changed.append)
    page.resize(720, 600)  # a narrow window: the banner's one-line text made the list give way
    QApplication.processEvents()
    list_width = page.conversations.width()
    page.view.widgets()[2].edit_button.click()
    assert page.composer.edit.toPlainText() == "Second question" and page.composer.editing
    QApplication.processEvents()
    assert page.conversations.width() == list_width  # the edit banner does not push the list aside
    page.composer.edit.setPlainText("Second question, edited")
    first_reply = page.conv.messages[1].content
    aloop.run(say(page, page.composer.edit.toPlainText()))
    conv = page.store.get(page.current_conversation_id)
    assert conv.id == original and changed == []  # a branch inside the conversation, not a second one
    assert [m.content for m in conv.messages[:3]] == ["First question", first_reply, "Second question, edited"]
    stats = conv.messages[3].stats
    assert stats["cached_tokens"] > 0 and stats["kind"] == "prefix"
    assert " · edited" in page.view.widgets()[3].badge.text()  # the cache vocabulary's reason (issue 19)
    assert page.view.widgets()[2].version_label.text() == "2/2"
    aloop.run(say(page, "Third question"))
    assert conv.messages[-1].stats["kind"] == "extend" and conv.messages[-1].stats["cached_tokens"] > 0
    assert len(conv.messages[2].branches[0].messages) == 2  # the original question and its reply, kept
    assert page.conversations.model.rowCount() == 1 and page.conversations.current_id() == original


def test_conversations_survive_a_restart(page, aloop, gateway, tmp_path, settings, qtbot):
    aloop.run(say(page, "Remember me"))
    first = page.current_conversation_id
    page.new_conversation()
    aloop.run(say(page, "Another one"))
    texts = page.view.plain_text()
    page.close()
    again = make_page(gateway, tmp_path, Settings(last_conversation_id=first), qtbot)
    assert again.current_conversation_id == first
    assert again.conversations.model.rowCount() == 2
    assert again.view.widgets()[0].text() == "Remember me" and len(again.view.widgets()) == 2
    second = again.conversations.model.id_at(0)
    again.conversations.view.setCurrentIndex(again.conversations.model.index(0, 0))  # a click in the list
    assert again.current_conversation_id == second and again.view.plain_text() == texts


def test_enter_sends_and_shift_enter_adds_a_line(page, aloop):
    edit = page.composer.edit
    QTest.keyClicks(edit, "line one")
    QTest.keyClick(edit, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    QTest.keyClicks(edit, "line two")
    assert edit.toPlainText() == "line one\nline two" and not page.busy
    QTest.keyClick(edit, Qt.Key.Key_Return)
    assert page.busy and edit.toPlainText() == ""
    aloop.run(idle(page))
    assert page.view.widgets()[0].text() == "line one\nline two"


def test_images_attach_only_with_a_vision_model(gateway, tmp_path, qtbot):
    page = ChatPage(gateway, ConversationStore(tmp_path / "c"), Settings)
    qtbot.addWidget(page)
    assert not page.composer.attach_button.isEnabled()
    assert "text only" in page.composer.attach_button.toolTip() and "Settings" in page.composer.attach_button.toolTip()
    page.set_supports_images(True)
    assert page.composer.attach_button.isEnabled()


def test_the_queued_state_shows_position_and_cancel_leaves_the_queue(aloop, tmp_path, settings, qtbot, screenshot):
    gw = start_gateway(aloop, slots=1)
    page = make_page(gw, tmp_path, settings, qtbot)

    async def scenario() -> None:
        other = gw.chat([Message("user", "Keep the worker busy")], SamplingParams(max_tokens=100_000, ignore_eos=True))
        async for event in other:
            if isinstance(event, ChunkEvent):
                break
        page.composer.edit.setPlainText("Am I waiting?")
        page.composer.submit()
        while page.queue_banner.isHidden():
            await asyncio.sleep(0.005)
        assert page.queue_banner.label.text().startswith("Waiting for the model — position 1, about")
        await asyncio.sleep(0.05)  # let the layout settle before the picture
        screenshot(page, "chat-queued")
        page.queue_banner.cancel_button.click()
        await idle(page)
        await gw.cancel(other.request_id)
        assert isinstance([e async for e in other][-1], Done)
        await gw.close()

    aloop.run(scenario(), timeout=30)
    assert page.queue_banner.isHidden() and page.view.notice() is not None
    assert "left the queue" in page.view.notice().label.text() and page.view.notice().retry_button.isVisible()
    conv = ConversationStore(page.store.root).get(page.current_conversation_id)
    assert [m.content for m in conv.messages] == ["Am I waiting?"]  # the user's message is kept


class FailOnce(Tap):
    """The real gateway, except that the first request ends as if its worker had crashed."""

    def chat(self, messages, params, request_id=None, **kw):
        if self.sent:
            return super().chat(messages, params, request_id)
        self.sent.append(messages)
        return FailedStream()


class FailedStream:
    request_id = "failed"

    def __init__(self) -> None:
        why = "Worker w0 stopped (exit code -9); the request can be retried."
        self.events = [ErrorEvent("failed", "worker_crashed", why, True)]

    def __aiter__(self):
        return self

    async def __anext__(self):
        if not self.events:
            raise StopAsyncIteration
        return self.events.pop(0)


def test_an_error_shows_inline_and_retry_answers(page, aloop, screenshot):
    page.gateway = FailOnce(page.gateway, lambda e: None)
    aloop.run(say(page, "Hello?"))
    notice = page.view.notice()
    assert notice is not None and "stopped unexpectedly" in notice.label.text() and "exit code -9" in notice.detail.text()
    assert [w.role for w in page.view.widgets()] == ["user"]
    assert [m.content for m in ConversationStore(page.store.root).get(page.current_conversation_id).messages] == ["Hello?"]
    screenshot(page, "chat-error")
    notice.retry_button.click()
    aloop.run(idle(page))
    assert page.view.notice() is None and [w.role for w in page.view.widgets()] == ["user", "assistant"]
    assert [m.role for m in page.store.get(page.current_conversation_id).messages] == ["user", "assistant"]


def test_a_refused_request_is_reported_without_losing_the_message(page, aloop):
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (16, 16), (200, 100, 0)).save(buf, "PNG")
    page.set_supports_images(True)  # this tiny model cannot take them: the gateway refuses at the door
    assert page.composer.add_images([("cat.png", buf.getvalue(), None)]) == 1
    aloop.run(say(page, "What is in this picture?"))
    assert "could not answer" in page.view.notice().label.text() and "cannot see images" in page.view.notice().detail.text()
    assert not page.view.notice().retry_button.isVisible()
    saved = page.store.get(page.current_conversation_id).messages
    assert [m.content for m in saved] == ["What is in this picture?"] and len(saved[0].images) == 1
    assert saved[0].images[0].startswith(str(page.store.images.root))  # copied into the conversations' storage


def test_a_message_no_request_may_carry_stays_in_the_composer(tmp_path, qtbot, monkeypatch):
    """Above messages.MAX_CHARS no model takes it: it is neither saved (a conversation file past
    the store's size cap would be set aside at the next start) nor cleared from the box."""
    from desktop.ui.chat import composer as composer_module

    monkeypatch.setattr(composer_module, "MAX_CHARS", 10)  # the real 2,000,000 would be slow to paste
    store = ConversationStore(tmp_path / "conversations")
    page = ChatPage(object(), store, Settings)
    qtbot.addWidget(page)
    said: list[str] = []
    page.status.connect(said.append)
    page.composer.edit.setPlainText("eleven char")
    QTest.keyClick(page.composer.edit, Qt.Key.Key_Return)
    assert page.composer.edit.toPlainText() == "eleven char"
    assert not page.conv.messages and not store.list() and not page.busy
    assert said and "11 characters" in said[-1] and "10" in said[-1]


def test_a_reply_observer_sees_each_reply_and_chats_get_recorded(page, aloop, tmp_path):
    from desktop.recording.chat_hook import ChatRecording
    from desktop.recording.replay import read_timeline
    from desktop.recording.writer import SessionRecorder

    opened: list[SessionRecorder] = []
    chats = ChatRecording(lambda title: opened.append(SessionRecorder(tmp_path / "rec", "chat", title=title)) or opened[-1],
                          lambda: True)
    page.reply_observers.append(chats.observe)
    page.reply_observers.insert(0, lambda reply: 1 / 0)  # a broken observer costs nothing but a log line
    aloop.run(say(page, "Say something long"))
    aloop.run(say(page, "And more"))
    for fut in chats.close_all():
        fut.result(10)
    conv = page.store.get(page.current_conversation_id)
    events = read_timeline(opened[0].folder)
    assert len(opened) == 1 and opened[0].meta["title"] == conv.title
    assert [e["text"] for e in events if e["kind"] == "user_text"] == ["Say something long", "And more"]
    answers = [e["text"] for e in events if e["kind"] == "assistant_text"]
    assert answers == [conv.messages[1].content, conv.messages[3].content]
    deltas = "".join(e["text"] for e in events if e["kind"] == "assistant_delta" and e["turn"] == 1)
    assert deltas == conv.messages[1].content
    metrics = [e for e in events if e["kind"] == "turn_metrics"]
    assert metrics[1]["cached_tokens"] == conv.messages[3].stats["cached_tokens"] > 0
