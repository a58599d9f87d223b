"""Issue 8, items 8, 9 and 14 in the window, on the real gateway over the tiny model: a reply goes
on while another conversation is shown (the list says it is replying) and is saved; a reply cut by
a crash comes back interrupted with Retry and Continue; a long prompt shows how far it is read."""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest
from PySide6.QtCore import Qt

from desktop.chat.conversations import INTERRUPTED, STREAMING, ConversationStore
from desktop.gateway.gateway import Gateway
from desktop.protocol import PrefillProgress
from desktop.chat.reply import CONTINUE_PROMPT
from desktop.settings import Settings
from desktop.ui.chat import ChatPage
from desktop.ui.chat.conversation_model import DETAIL_ROLE
from desktop.ui.chat.turn import REPLYING
from desktop.workers.config import WorkerConfig
from desktop.workers import worker as worker_module
from ui_helpers import start_gateway

pytestmark = pytest.mark.hardening

LONG = " ".join(f"word{i}" for i in range(80))  # some 500 tokens: dozens of 8-token prefill chunks


@pytest.fixture
def gateway(aloop, monkeypatch):
    """Small prefill chunks, so that a long message is read in many steps, each reported."""
    monkeypatch.setattr(worker_module, "PROGRESS_S", 0.0)
    gw = start_gateway(aloop, WorkerConfig(num_slots=4, prefill_chunk=8, prefill_budget=8))
    yield gw
    aloop.run(gw.close())


def make_page(gw, root, qtbot, **settings) -> ChatPage:
    values = Settings(**{"temperature": 0.0, "max_tokens": 24, **settings})
    page = ChatPage(gw, ConversationStore(root / "conversations"), lambda: values)
    qtbot.addWidget(page)
    page.resize(1100, 720)
    page.show()
    return page


class Gate:
    """The real gateway, except that the first request that reports prefill progress is held
    after the page handled its second report, until `release` is set."""

    def __init__(self, gw: Gateway) -> None:
        self.gw, self.sent, self.reports = gw, [], 0
        self.held, self.release, self.armed = asyncio.Event(), asyncio.Event(), True

    def chat(self, messages, params, request_id=None, **kw):
        self.sent.append(messages)
        return GatedStream(self.gw.chat(messages, params, request_id=request_id), self)

    async def cancel(self, request_id: str) -> None:
        await self.gw.cancel(request_id)


class GatedStream:
    def __init__(self, stream, gate: Gate) -> None:
        self.stream, self.gate, self.request_id, self.last = stream, gate, stream.request_id, None

    def __aiter__(self):
        return self

    async def __anext__(self):
        if isinstance(self.last, PrefillProgress) and self.gate.armed:
            self.gate.reports += 1
        if self.gate.reports == 2 and self.gate.armed:
            self.gate.armed = False
            self.gate.held.set()
            await self.gate.release.wait()
        self.last = await self.stream.__anext__()
        return self.last


async def idle(page: ChatPage) -> None:
    while page.busy or len(page.tasks):
        await asyncio.sleep(0.005)


async def until(check, timeout: float = 20.0) -> None:
    async def loop() -> None:
        while not check():
            await asyncio.sleep(0.005)
    await asyncio.wait_for(loop(), timeout)


def on_disk(page: ChatPage, conv_id: str):
    return ConversationStore(page.store.root).get(conv_id)


def saved_done(page: ChatPage) -> bool:
    """The shown conversation's last message is saved as finished (status "")."""
    return on_disk(page, page.current_conversation_id).messages[-1].status == ""


def wait_saved_done(aloop, page: ChatPage) -> None:
    """saved_done, or a failure that says what is on disk and what the page is doing."""
    try:
        aloop.run(until(lambda: saved_done(page), timeout=45), timeout=60)
    except (TimeoutError, asyncio.TimeoutError):
        last = on_disk(page, page.current_conversation_id).messages[-1]
        reply = page.turns.of(page.current_conversation_id)
        raise AssertionError(f"never saved as finished: on disk {last.role} status={last.status!r} "
                             f"{len(last.content)} chars; page busy={page.busy} tasks={len(page.tasks)}; reply "
                             f"{None if reply is None else (reply.phase, reply.error, reply.save_error)}; "
                             f"gateway {getattr(page.gateway, 'gw', page.gateway).stats()}") from None


def test_replies_go_on_while_other_conversations_are_shown(gateway, tmp_path, qtbot, aloop, screenshot):
    page = make_page(gateway, tmp_path, qtbot)
    page.gateway = gate = Gate(gateway)
    rows = page.conversations.model

    async def scenario() -> None:
        page.send(LONG)  # A: held while its prompt is being read
        await gate.held.wait()
        a = page.current_conversation_id
        bubble = page.view.widgets()[-1]
        assert page.busy and bubble.role == "assistant" and bubble._waiting.text().startswith("Reading your message…")
        page.new_conversation()  # look elsewhere while A is prefilling
        assert not page.busy and page.view.widgets() == [] and page.composer.send_button.text() == "Send"
        row = rows.index(rows.row_of(a), 0)
        assert rows.data(row, DETAIL_ROLE) == REPLYING and not rows.data(row, Qt.ItemDataRole.DecorationRole).isNull()
        page.send("Second question")  # B streams at the same time
        b = page.current_conversation_id
        await until(lambda: page.view.widgets()[-1].text())
        assert {rows.replying(a), rows.replying(b)} == {REPLYING}
        await asyncio.sleep(0.1)  # a few spinner frames, then the picture
        screenshot(page, "chat-replying-in-background")
        assert page.open_conversation(a)  # back to A (still held in its prefill); B goes on unseen
        assert page.busy and [w.role for w in page.view.widgets()] == ["user", "assistant"]
        assert page.view.widgets()[-1]._waiting.text().startswith("Reading your message…")
        gate.release.set()
        await until(lambda: page.turns.of(a) is None and page.turns.of(b) is None)
        await idle(page)
        for conv_id in (a, b):
            saved = on_disk(page, conv_id)
            assert [m.role for m in saved.messages] == ["user", "assistant"], conv_id
            assert saved.messages[1].content and saved.messages[1].status == "" and saved.messages[1].stats["generated_tokens"] == 24
        assert page.view.widgets()[-1].text() == on_disk(page, a).messages[1].content and not page.busy
        assert rows.replying(a) is None and rows.replying(b) is None
        assert page.open_conversation(b) and page.view.widgets()[-1].text() == on_disk(page, b).messages[1].content

    aloop.run(scenario(), timeout=60)


def test_stop_ends_only_the_shown_reply_and_delete_cancels_a_reply_first(gateway, tmp_path, qtbot, aloop):
    page = make_page(gateway, tmp_path, qtbot, max_tokens=5000)

    async def scenario() -> None:
        page.send("Tell me a very long story")
        a = page.current_conversation_id
        await until(lambda: page.view.widgets()[-1].text())
        page.new_conversation()
        page.send("And another one")
        b = page.current_conversation_id
        await until(lambda: page.view.widgets()[-1].text())
        page.stop()  # Esc/Stop: the shown reply only
        await until(lambda: page.turns.of(b) is None)
        assert page.turns.of(a) is not None and not page.busy
        assert page.store.get(b).messages[-1].stats["finish_reason"] in ("stopped", "cancelled")
        page.delete(a, confirmed=True)  # A is replying: its reply is cancelled, then it is deleted
        await idle(page)
        assert a not in page.store and page.turns.of(a) is None
        await asyncio.sleep(0.3)  # nothing writes it back
        assert not (page.store.root / f"{a}.json").exists()
        assert gateway.stats().requests.running == 0  # A's request (5000 tokens) was stopped
        assert page.conversations.model.rowCount() == 1
        assert on_disk(page, b).messages[-1].stats["finish_reason"] in ("stopped", "cancelled")

    aloop.run(scenario(), timeout=60)


def test_a_reply_cut_by_a_crash_comes_back_interrupted_with_retry_and_continue(gateway, tmp_path, qtbot, aloop, screenshot):
    page = make_page(gateway, tmp_path, qtbot, max_tokens=5000)
    crashed = tmp_path / "as-left-by-kill-9"

    async def stream_until_saved() -> str:
        page.send("Tell me a very long story")
        conv_id = page.current_conversation_id
        path = page.store.root / f"{conv_id}.json"
        while True:  # the file as a kill -9 would leave it: the reply saved as it streams
            saved = json.loads(path.read_text(encoding="utf-8"))["messages"]
            if len(saved) == 2 and saved[1]["status"] == STREAMING and len(saved[1]["content"]) > 20:
                shutil.copytree(page.store.root, crashed / "conversations")
                break
            await asyncio.sleep(0.05)
        page.stop()
        await idle(page)
        return saved[1]["content"]

    partial = aloop.run(stream_until_saved(), timeout=30)

    def restarted(name: str) -> ChatPage:
        shutil.copytree(crashed, tmp_path / name)
        store = ConversationStore(tmp_path / name / "conversations")
        conv_id = store.list()[0].id
        assert store.get(conv_id).messages[-1].status == INTERRUPTED
        again = make_page(gateway, tmp_path / name, qtbot, last_conversation_id=conv_id)
        again.gateway = Gate(gateway)  # to see what is sent; nothing is held
        again.gateway.armed = False
        return again

    page = restarted("continue")
    reply = page.view.widgets()[-1]
    assert reply.text() == partial and reply.interrupted
    assert reply.retry_button.isVisible() and reply.continue_button.isVisible() and not reply.regenerate_button.isVisible()
    aloop.run(asyncio.sleep(0.1))  # let the layout settle before the picture
    screenshot(page, "chat-interrupted-reply")
    reply.continue_button.click()
    aloop.run(idle(page))
    wait_saved_done(aloop, page)  # the last save runs on the writer thread, after the task
    sent = page.gateway.sent[-1]
    assert sent[-2] == {"role": "assistant", "content": partial} and sent[-1] == {"role": "user", "content": CONTINUE_PROMPT}
    saved = on_disk(page, page.current_conversation_id).messages
    assert [m.role for m in saved] == ["user", "assistant"] and saved[1].status == ""
    assert saved[1].content.startswith(partial) and len(saved[1].content) > len(partial)
    assert page.view.widgets()[-1].text() == saved[1].content and not page.view.widgets()[-1].interrupted

    page = restarted("retry")
    page.view.widgets()[-1].retry_button.click()
    aloop.run(idle(page))
    wait_saved_done(aloop, page)
    assert [m["role"] for m in page.gateway.sent[-1]] == ["system", "user"]  # the partial reply is not sent
    saved = on_disk(page, page.current_conversation_id).messages
    assert [m.role for m in saved] == ["user", "assistant"] and saved[1].status == "" and saved[1].content != partial
    assert saved[1].stats["generated_tokens"] == 24 and not page.view.widgets()[-1].interrupted


def test_a_long_prompt_shows_how_far_it_has_been_read(gateway, tmp_path, qtbot, aloop, screenshot):
    page = make_page(gateway, tmp_path, qtbot)
    page.gateway = gate = Gate(gateway)

    async def scenario() -> None:
        page.send(LONG)
        await gate.held.wait()
        bubble = page.view.widgets()[-1]
        text = bubble._waiting.text()
        assert text.startswith("Reading your message… 16 / ") and " tokens · about " in text and text.endswith(" left")
        assert bubble.progress.isVisible() and 0 < bubble.progress.value() < 100
        await asyncio.sleep(0.05)
        screenshot(page, "chat-prefill-progress")
        gate.release.set()
        await idle(page)
        assert bubble.text() and not bubble._waiting.isVisible() and not bubble.progress.isVisible()

    aloop.run(scenario(), timeout=60)
