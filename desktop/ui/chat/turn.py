"""The chat page's replies: at most one per conversation, each a Reply (chat/reply.py) run as an
asyncio task whether or not its conversation is shown. The shown conversation's reply is drawn
into the view (its text, how far a long prompt has been read, the queue banner, the voice); the
others turn a spinner in the conversation list."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from desktop.chat.branches import Edit
from desktop.chat.conversations import INTERRUPTED, Conversation, StoredMessage
from desktop.chat.export import stats_line
from desktop.chat.reply import Phase, Reply
from desktop.chat.reply_versions import count
from desktop.ui.chat.message_widget import THINKING, MessageWidget
from desktop.ui.chat.notice import UNANSWERED, eta_text, friendly, in_user_terms
from desktop.ui.chat.take_back import TakeBack, wanted
from desktop.ui.tasks import Tasks

if TYPE_CHECKING:
    from desktop.ui.chat.page import ChatPage

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
    """The replies of `page` by conversation id, and the notices of those that ended without
    an answer (shown again when their conversation is)."""

    def __init__(self, page: ChatPage) -> None:
        self.page = page
        self.tasks = Tasks()
        self.take_back = TakeBack(page, self.tasks)  # refused messages go back into the text box
        self._replies: dict[str, Reply] = {}
        self._notices: dict[str, tuple[str, str, bool, bool]] = {}  # id → text, detail, error, retry
        self._runs: dict[Reply, asyncio.Task] = {}  # each reply's task, until the reply ends

    def of(self, conv_id: str) -> Reply | None:
        return self._replies.get(conv_id)

    def start(self, conv: Conversation, previous: StoredMessage | None = None, *, continuing: bool = False,
              edit: Edit | None = None) -> Reply:
        """Write a reply to `conv` (the shown conversation) with the page's gateway and settings;
        `edit`: the edit that made its last message (taken back if the reply fails)."""
        page = self.page
        reply = Reply(page.gateway, page.store, conv, page.settings().sampling(), previous=previous,
                      continuing=continuing, edit=edit)
        self.take_back.forget(conv.id)
        self._replies[conv.id] = reply
        self._notices.pop(conv.id, None)
        page.view.clear_notice()
        reply.listeners.append(self._on_reply)
        for observe in page.reply_observers:
            try:
                observe(reply)
            except Exception:  # an observer's bug (the recorder's) must not stop the reply
                log.exception("reply observer failed")
        page.speech.silence()
        page.speech.follow(reply)  # after the bubble's listener: its request id is known by then
        self._mark_list()
        self.show()
        self._runs[reply] = self.tasks.spawn(reply.run())
        return reply

    def stop(self, conv_id: str) -> None:
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
        page = self.page
        reply = self._replies.get(page.conv.id)
        page.set_busy(reply is not None)
        if reply is None:
            page.queue_banner.hide()
            if self.take_back.pending(page.conv.id):  # refused while another conversation was shown
                self.take_back.due(page.conv.id)
                return
            notice = self._notices.get(page.conv.id) or self._unanswered(page.conv)
            if notice is not None and page.view.notice() is None:
                text, detail, error, retry = notice
                page.view.show_notice(text, detail, error=error, retry=retry)
            return
        if page.view.count() == reply.at:  # a new reply: its bubble
            bubble = page.view.append("assistant", reply.message.content)
            bubble.set_versions(reply.message.shown, count(reply.message))
        self._widget(reply).set_streaming(True)
        self._draw(reply, reply.phase.value)

    def _unanswered(self, conv: Conversation) -> tuple[str, str, bool, bool] | None:
        """A saved conversation that ends with the user's message (its reply failed or never came,
        e.g. before a restart): say so, with Retry, which answers that message."""
        if conv.messages and conv.messages[-1].role == "user" and conv.id in self.page.store:
            return UNANSWERED, "Retry asks the assistant to answer it.", False, True
        return None

    def _mark_list(self) -> None:
        self.page.conversations.set_replying({conv_id: REPLYING for conv_id in self._replies})

    def _widget(self, reply: Reply) -> MessageWidget:
        widget = self.page.view.widget_at(reply.at)  # the last message: always drawn
        assert widget is not None
        return widget

    def _on_reply(self, reply: Reply, what: str) -> None:
        page = self.page
        shown = reply.conv is page.conv
        if what in ("done", "failed") and self._replies.get(reply.conv.id) is reply:
            del self._replies[reply.conv.id]
            run = self._runs.pop(reply, None)
            self._mark_list()
            if reply.conv.id not in page.store:  # being deleted
                return
            if wanted(reply):
                if shown:
                    self.take_back.now(reply, run)
                    self.show()  # no reply any more: Send instead of Stop
                else:
                    self.take_back.later(reply, run)
                    title = f"“{reply.conv.title}”" if reply.conv.title else "another conversation"
                    page.status.emit(f"The message in {title} was not answered; it goes back to the text box there")
                    page.refresh_list()
                return
            self._ended(reply, shown)
        elif shown:
            self._draw(reply, what)

    def _draw(self, reply: Reply, what: str) -> None:
        page = self.page
        if what == "loading":
            if page.queue_banner.isHidden():
                page.queue_banner.show_loading()
        elif what == "queued":
            page.queue_banner.show_position(reply.position, reply.eta_s)
        else:
            page.queue_banner.hide()
        widget = self._widget(reply)
        if what == "text":
            widget.request_id = reply.request_id  # ties the bubble to its spoken audio
            widget.set_text(reply.message.content)
        elif not reply.text:
            widget.set_waiting(*waiting_text(reply))

    def _ended(self, reply: Reply, shown: bool) -> None:
        page, conv = self.page, reply.conv
        title = f"“{conv.title}”" if conv.title else "another conversation"
        wrote = reply.error is None and bool(reply.text)
        if reply.error is not None:
            head, detail = friendly(*reply.error)
            detail = in_user_terms(detail, conv)
            self._notices[conv.id] = (head, detail, True, reply.error[2])
            page.status.emit("The assistant could not answer" if shown else
                             f"The reply in {title} could not be finished")
        elif not wrote:
            waited = not reply.stats.get("generated_tokens") and not reply.stats.get("input_tokens")
            what = "You left the queue" if waited else "Stopped"
            self._notices[conv.id] = (f"{what} before the assistant replied.", "", False, True)
        elif shown:
            page.status.emit("Reply: " + stats_line(reply.message.stats))
        else:
            page.status.emit(f"The reply in {title} is finished")
        if reply.save_error:
            page.status.emit(f"Could not save the conversation: {reply.save_error}")
        if shown:
            self._redraw(reply, wrote)
        page.refresh_list()

    def _redraw(self, reply: Reply, wrote: bool) -> None:
        page = self.page
        if wrote:  # the bubble keeps its text (and its voice)
            widget = self._widget(reply)
            widget.set_text(reply.message.content)
            widget.set_stats(reply.message.stats)
            widget.set_streaming(False)
            widget.set_interrupted(reply.message.status == INTERRUPTED)
            widget.set_versions(reply.message.shown, count(reply.message))
        else:
            page.view.show_from(reply.at, reply.conv.messages)
            page.speech.refresh()
        self.show()

