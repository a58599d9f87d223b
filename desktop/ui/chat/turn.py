"""The chat page's replies: at most one per conversation, each a Reply (chat/reply.py) run as an
asyncio task whether or not its conversation is shown. The shown conversation's reply is drawn
into the view (its text, how far a long prompt has been read, the queue banner, the voice); the
others turn a spinner in the conversation list."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

from desktop.chat.branches import Edit
from desktop.chat.conversations import INTERRUPTED, Conversation, ConversationStore
from desktop.chat.export import stats_line
from desktop.chat.reply import Phase, Reply
from desktop.chat.reply_versions import count
from desktop.ui.chat.conversation_list import ConversationList
from desktop.ui.chat.message_view import MessageView
from desktop.ui.chat.tool_turns import ToolTurns
from desktop.ui.chat.message_widget import THINKING, MessageWidget
from desktop.ui.chat.notice import UNANSWERED, QueueBanner, eta_text, friendly, in_user_terms
from desktop.ui.chat.take_back import TakeBack, wanted
from desktop.ui.chat.voice_control import ChatVoice
from desktop.tasks import TaskSet

log = logging.getLogger(__name__)
REPLYING = "Replying…"  # a replying conversation's line in the list


def waiting_text(reply: Reply) -> tuple[str, float | None]:
    """What a reply's bubble says before its first words, and how far along (0–1) when known:
    "Reading your message… 1,234 / 7,000 tokens · about 12 s left"."""
    if reply.phase is Phase.LOADING:
        return "Waiting for the model to load…", None
    if reply.phase is Phase.QUEUED:
        return "Waiting for the model…", None
    p = reply.progress
    if reply.phase is not Phase.READING or p is None:
        return THINKING, None
    done, total = p.done - p.cached, max(p.total - p.cached, 1)
    left = reply.seconds_left
    when = f" · {eta_text(left)} left" if left is not None else ""
    return f"Reading your message… {done:,} / {total:,} tokens{when}", done / total


class Turns:
    """The chat page's replies by conversation id, and the notices of those that ended without an
    answer (shown again when their conversation is). `new_reply(conv, **how)` makes a Reply with the
    page's gateway and settings; `shown()` is the conversation the page shows; `observers` get each
    Reply as it starts (e.g. the chat recorder); `set_busy` follows whether the shown one replies."""

    def __init__(self, new_reply: Callable[..., Reply], store: ConversationStore, view: MessageView,
                 banner: QueueBanner, speech: ChatVoice, rows: ConversationList, take_back: TakeBack,
                 tasks: TaskSet, *, shown: Callable[[], Conversation], say: Callable[[str], None],
                 set_busy: Callable[[bool], None], refresh_list: Callable[[], None],
                 observers: list[Callable[[Any], None]], tool_turns: ToolTurns | None = None) -> None:
        self.new_reply, self.store, self.view, self.banner = new_reply, store, view, banner
        self.speech, self.rows, self.tasks = speech, rows, tasks
        self.take_back = take_back  # refused messages go back into the text box
        self.shown, self.say, self.set_busy, self.refresh_list = shown, say, set_busy, refresh_list
        self.observers = observers
        self.tool_turns = tool_turns  # tool rounds, when the chat offers tools
        self._replies: dict[str, Reply] = {}
        self._notices: dict[str, tuple[str, str, bool, bool]] = {}  # id → text, detail, error, retry
        self._runs: dict[Reply, asyncio.Task] = {}  # each reply's task, until the reply ends

    def of(self, conv_id: str) -> Reply | None:
        return self._replies.get(conv_id)

    def busy(self, conv_id: str) -> bool:
        """Whether the conversation's turn goes on: a reply is written, or its tool calls wait or run."""
        return conv_id in self._replies or (self.tool_turns is not None and self.tool_turns.running(conv_id))

    def start(self, conv: Conversation, *, again: bool = False, continuing: bool = False,
              edit: Edit | None = None, typed: bool = False) -> Reply:
        """Write a reply to `conv` (the shown conversation); `again`: its last reply again (the old
        one comes back if no new reply arrives); `edit`: the edit that made its last message (taken
        back if the reply fails); `typed`: its last message was prefilled while it was typed. With
        tools on, the turn runs as tool rounds (each round's Reply started here too)."""
        tools = self.tool_turns.specs() if self.tool_turns is not None else []
        reply = self._start_one(conv, tools, again=again, continuing=continuing, edit=edit, typed=typed)
        if tools and self.tool_turns is not None:
            first = [reply]
            rounds = self.tool_turns.begin(conv, lambda t: first.pop() if first else self._start_one(conv, t))
            self.tasks.spawn(self._tool_rounds(conv, rounds))
        return reply

    async def _tool_rounds(self, conv: Conversation, rounds: Any) -> None:
        try:
            await rounds.run()
        finally:
            assert self.tool_turns is not None
            self.tool_turns.end(conv.id)
            if conv is self.shown():
                self.show()

    def _start_one(self, conv: Conversation, tools: list[dict[str, Any]], **how: Any) -> Reply:
        reply = self.new_reply(conv, tools=tools, **how)
        self.take_back.forget(conv.id)
        self._replies[conv.id] = reply
        self._notices.pop(conv.id, None)
        self.view.clear_notice()
        reply.listeners.append(self._on_reply)
        for observe in self.observers:
            try:
                observe(reply)
            except Exception:  # an observer's bug (the recorder's) must not stop the reply
                log.exception("reply observer failed")
        self.speech.silence()
        self.speech.follow(reply)  # after the bubble's listener: its request id is known by then
        self._mark_list()
        self.show()
        self._runs[reply] = self.tasks.spawn(reply.run())
        return reply

    def stop(self, conv_id: str) -> None:
        if self.tool_turns is not None:
            self.tool_turns.stop(conv_id)
        reply = self._replies.get(conv_id)
        if reply is not None:
            self.tasks.spawn(reply.stop())

    async def stop_all(self) -> None:
        """The app is closing or the engine restarts: every reply ends now, one with text is kept
        as interrupted (it can be continued later)."""
        for reply in list(self._replies.values()):
            await reply.stop(interrupted=True)
        await self.tasks.wait()

    async def forget(self, conv_id: str) -> None:
        """The conversation is being deleted: end its reply first, writing nothing more."""
        if self.tool_turns is not None:
            self.tool_turns.stop(conv_id)  # a call waiting for approval is denied, no round follows
        reply = self._replies.pop(conv_id, None)
        self._notices.pop(conv_id, None)
        self.take_back.forget(conv_id)
        if reply is not None:
            self._runs.pop(reply, None)
            await reply.abandon()
            self._mark_list()

    # ------------------------------------------------------------------ the shown conversation

    def show(self) -> None:
        """Draw the shown conversation's reply, if it has one, into the view (freshly drawn from
        its messages), or the notice of its last reply that ended without an answer."""
        conv = self.shown()
        reply = self._replies.get(conv.id)
        rounds = self.tool_turns is not None and self.tool_turns.running(conv.id)
        self.set_busy(reply is not None or rounds)
        if reply is None and rounds:  # between rounds: the calls wait for approval or run
            self.banner.hide()
            if self.view.count() < len(conv.messages) + 1:
                self.tool_turns.draw_pending(conv)  # type: ignore[union-attr]
            return
        if reply is None:
            self.banner.hide()
            if self.take_back.pending(conv.id):  # refused while another conversation was shown
                self.take_back.due(conv.id)
                return
            notice = self._notices.get(conv.id) or self._unanswered(conv)
            if notice is not None and self.view.notice() is None:
                text, detail, error, retry = notice
                self.view.show_notice(text, detail, error=error, retry=retry)
            return
        if self.view.count() == reply.at:  # a new reply: its bubble
            bubble = self.view.append("assistant", reply.message.content)
            bubble.set_versions(reply.message.shown, count(reply.message))
        self._widget(reply).set_streaming(True)
        self._draw(reply, reply.phase.value)

    def _unanswered(self, conv: Conversation) -> tuple[str, str, bool, bool] | None:
        """A saved conversation that ends with the user's message (its reply failed or never came,
        e.g. before a restart): say so, with Retry, which answers that message."""
        if conv.messages and conv.messages[-1].role == "user" and conv.id in self.store:
            return UNANSWERED, "Retry asks the assistant to answer it.", False, True
        return None

    def _mark_list(self) -> None:
        self.rows.set_replying({conv_id: REPLYING for conv_id in self._replies})

    def _widget(self, reply: Reply) -> MessageWidget:
        widget = self.view.widget_at(reply.at)  # the last message: always drawn
        assert widget is not None
        return widget

    def _on_reply(self, reply: Reply, what: str) -> None:
        shown = reply.conv is self.shown()
        if what in ("done", "failed") and self._replies.get(reply.conv.id) is reply:
            del self._replies[reply.conv.id]
            run = self._runs.pop(reply, None)
            self._mark_list()
            if reply.conv.id not in self.store:  # being deleted
                return
            if wanted(reply):
                if shown:
                    self.take_back.now(reply, run)
                    self.show()  # no reply any more: Send instead of Stop
                else:
                    self.take_back.later(reply, run)
                    title = f"“{reply.conv.title}”" if reply.conv.title else "another conversation"
                    self.say(f"The message in {title} was not answered; it goes back to the text box there")
                    self.refresh_list()
                return
            self._ended(reply, shown)
        elif shown:
            self._draw(reply, what)

    def _draw(self, reply: Reply, what: str) -> None:
        if what == "loading":
            if self.banner.isHidden():
                self.banner.show_loading()
        elif what == "queued":
            self.banner.show_position(reply.position, reply.eta_s)
        else:
            self.banner.hide()
        widget = self._widget(reply)
        if what == "text":
            widget.request_id = reply.request_id  # ties the bubble to its spoken audio
            widget.set_text(reply.message.content)
        elif not reply.text:
            widget.set_waiting(*waiting_text(reply))

    def _ended(self, reply: Reply, shown: bool) -> None:
        conv = reply.conv
        title = f"“{conv.title}”" if conv.title else "another conversation"
        wrote = reply.error is None and bool(reply.text)
        if reply.error is not None:
            head, detail = friendly(*reply.error)
            detail = in_user_terms(detail, conv)
            self._notices[conv.id] = (head, detail, True, reply.error[2])
            self.say("The assistant could not answer" if shown else
                     f"The reply in {title} could not be finished")
        elif not wrote:
            waited = not reply.stats.get("generated_tokens") and not reply.stats.get("input_tokens")
            what = "You left the queue" if waited else "Stopped"
            self._notices[conv.id] = (f"{what} before the assistant replied.", "", False, True)
        elif shown:
            self.say("Reply: " + stats_line(reply.message.stats))
        else:
            self.say(f"The reply in {title} is finished")
        if reply.save_error:
            self.say(f"Could not save the conversation: {reply.save_error}")
        if shown:
            self._redraw(reply, wrote)
        self.refresh_list()

    def _redraw(self, reply: Reply, wrote: bool) -> None:
        if wrote:  # the bubble keeps its text (and its voice)
            widget = self._widget(reply)
            widget.set_text(reply.message.content)
            widget.set_stats(reply.message.stats)
            widget.set_streaming(False)
            widget.set_interrupted(reply.message.status == INTERRUPTED)
            widget.set_versions(reply.message.shown, count(reply.message))
        else:
            self.view.show_from(reply.at, reply.conv.messages)
            self.speech.refresh()
        self.show()

