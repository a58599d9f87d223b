"""Issue 19, new-user item 2: a reply cut short says which limit cut it — "Stopped at the reply length
limit (512 tokens)" with Continue, which appends to the same reply, or "The conversation has filled
the model's window (…)" with the right advice — and a message the worker refuses because the window
is full goes back into the text box instead of piling up unanswered in the conversation."""

from __future__ import annotations

import asyncio

import pytest

from desktop.chat.conversations import ConversationStore
from desktop.chat.export import stats_line
from desktop.chat.reply import CONTINUE_PROMPT
from desktop.chat.reply_limit import Cut, limit_of, which_length
from desktop.protocol import ChunkEvent, Done, PrefillDone, TokenStats
from desktop.settings import Settings
from desktop.ui.chat import ChatPage
from test_chat_page import idle, make_page, say

pytestmark = pytest.mark.hardening


class Limited:
    """A gateway whose n-th request streams `replies[n]` = (text, generated, input, finish reason)."""

    def __init__(self, replies: list[tuple[str, int, int, str]]) -> None:
        self.replies, self.sent = replies, []

    def chat(self, messages, params, request_id=None, **kw):
        self.sent.append(list(messages))
        text, generated, prompt, reason = self.replies[len(self.sent) - 1]
        return Stream(f"r{len(self.sent)}", self._events(f"r{len(self.sent)}", text, generated, prompt, reason))

    async def _events(self, rid, text, generated, prompt, reason):
        yield PrefillDone(rid, prompt, 0, "miss", 5.0, 0)
        for word in text.split(" "):
            yield ChunkEvent(rid, word + " ")
            await asyncio.sleep(0)
        yield Done(rid, text, TokenStats(prompt, 0, generated, "miss", "", 5.0, 9.0, 100.0, 0.0, reason))

    async def cancel(self, request_id: str) -> None:
        pass


class Stream:
    def __init__(self, rid, events) -> None:
        self.request_id, self.events = rid, events

    def __aiter__(self):
        return self.events


def limit_line(page: ChatPage, i: int = -1) -> str:
    row = page.view.widgets()[i].limit_row
    return row.note.text() if row.isVisibleTo(page) else ""


def test_the_reply_limit_says_so_and_continue_appends_to_the_same_reply(tmp_path, qtbot, aloop, screenshot):
    gw = Limited([("Once upon a time there was", 512, 40, "length"), ("a small lighthouse.", 5, 600, "stop")])
    page = make_page(gw, tmp_path, Settings(max_tokens=512), qtbot)
    aloop.run(say(page, "Tell me a story"))
    reply = page.view.widgets()[-1]
    assert limit_line(page) == "Stopped at the reply length limit (512 tokens)."
    assert "cut at the reply length limit" in reply.badge.text() and "token limit" not in reply.badge.text()
    assert reply.limit_row.continue_button.isVisibleTo(page) and reply.limit_row.continue_button.isEnabled()
    qtbot.wait(30)
    screenshot(page, "chat-reply-limit")
    reply.limit_row.continue_button.click()
    aloop.run(idle(page))
    assert gw.sent[-1][-2:] == [{"role": "assistant", "content": "Once upon a time there was"},
                                {"role": "user", "content": CONTINUE_PROMPT}]
    assert [m.role for m in page.conv.messages] == ["user", "assistant"]  # the same reply, longer
    assert page.conv.messages[-1].content == "Once upon a time there was a small lighthouse."
    assert page.view.widgets()[-1].text() == page.conv.messages[-1].content and limit_line(page) == ""
    saved = ConversationStore(page.store.root).get(page.current_conversation_id).messages[-1]
    assert saved.content == page.conv.messages[-1].content and limit_of(saved.stats) is None


def test_a_full_window_says_so_without_continue(tmp_path, qtbot, aloop, screenshot):
    gw = Limited([("It was a dark and", 192, 8000, "window")])
    page = make_page(gw, tmp_path, Settings(max_tokens=512), qtbot)
    aloop.run(say(page, "Tell me a story"))
    line = limit_line(page)
    assert line.startswith("The conversation has filled the model's window (8,192 tokens).")
    assert "forget the oldest" in line and "Settings" in line  # the next message slides (issue 22), unless told to stop
    assert not page.view.widgets()[-1].limit_row.continue_button.isVisibleTo(page)
    assert "cut: the model's window is full" in page.view.widgets()[-1].badge.text()
    qtbot.wait(30)
    screenshot(page, "chat-window-full")


def test_only_the_last_reply_shows_the_line_and_old_files_read_as_before():
    assert limit_of({"finish_reason": "length", "generated_tokens": 512}).cut is Cut.REPLY
    assert limit_of({"finish_reason": "window", "generated_tokens": 92, "input_tokens": 8100}).tokens == 8192
    assert limit_of({"finish_reason": "stop"}) is None and limit_of(None) is None
    assert limit_of({"finish_reason": "length", "generated_tokens": "x"}) is None  # a damaged file
    # a remote server says "length" for both: fewer tokens than the reply's own limit means the window
    assert which_length({"finish_reason": "length", "generated_tokens": 90}, 512)["finish_reason"] == "window"
    assert which_length({"finish_reason": "length", "generated_tokens": 512}, 512)["finish_reason"] == "length"
    assert "token limit" not in stats_line({"finish_reason": "length", "generated_tokens": 512})


@pytest.fixture
def gateway(two_slot_gateway):
    return two_slot_gateway


def test_a_message_refused_by_a_full_window_goes_back_and_never_piles_up(gateway, tmp_path, qtbot, aloop,
                                                                         screenshot):
    """On the tiny model (2,048-token window): a long message leaves room for a few tokens, its reply
    is cut by the window; with "Stop and tell me" each short message after it goes back into the text box."""
    page = make_page(gateway, tmp_path, Settings(temperature=0.0, max_tokens=64, context_overflow="stop"), qtbot)
    from desktop.model.loader import ModelSpec, load_model
    from desktop.model.messages import Message

    lm = load_model(ModelSpec("tiny"))  # the worker's model: its template counts the prompt
    window = lm.context_length
    system = Message("system", page.conv.system_prompt)
    words = 10
    while len(lm.template.prompt_ids([system, Message("user", " ".join(["w"] * (words + 10)))])) < window - 8:
        words += 10
    aloop.run(say(page, " ".join(["w"] * words)))
    assert [m.role for m in page.conv.messages] == ["user", "assistant"], page.view.notice() and page.view.notice().label.text()
    line = limit_line(page)
    assert line.startswith("The conversation has filled the model's window (2,048 tokens)."), line
    conv_id = page.current_conversation_id
    nine = "What is the capital of France and of Spain?"
    for attempt in range(2):
        aloop.run(say(page, nine))
        assert [m.role for m in page.conv.messages] == ["user", "assistant"]  # not left unanswered
        assert page.composer.edit.toPlainText() == nine  # back in the text box, once
        notice = page.view.notice()
        assert notice is not None and "filled the model's window (2,048 tokens)" in notice.label.text()
        assert "shorten" not in notice.label.text() + notice.detail.text()
        assert "edit an earlier message" in notice.label.text()
    saved = ConversationStore(page.store.root).get(conv_id)
    assert [m.role for m in saved.messages] == ["user", "assistant"]
    qtbot.wait(30)
    screenshot(page, "chat-window-full-refused")
