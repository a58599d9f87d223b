"""Switching what the shown conversation shows: another kept version of its last reply
(chat/reply_versions.py) or another branch of an edited user message (chat/branches.py); the
conversation goes on from what is shown, which is saved at once."""

from __future__ import annotations

from typing import Callable

from desktop.chat import branches
from desktop.chat.conversations import Conversation, ConversationStore
from desktop.chat.reply_versions import count, switch
from desktop.ui.chat.message_view import MessageView
from desktop.ui.chat.message_widget import VoiceState
from desktop.ui.chat.voice_control import ChatVoice


class Versions:
    """`shown()`: the conversation the page shows; `busy()`: whether its reply is being written
    (nothing switches then); `redraw_turn()` draws what its end says (turn.py)."""

    def __init__(self, store: ConversationStore, view: MessageView, speech: ChatVoice, *,
                 shown: Callable[[], Conversation], busy: Callable[[], bool], say: Callable[[str], None],
                 refresh_list: Callable[[], None], redraw_turn: Callable[[], None]) -> None:
        self.store, self.view, self.speech = store, view, speech
        self.shown, self.busy, self.say = shown, busy, say
        self.refresh_list, self.redraw_turn = refresh_list, redraw_turn

    def show(self, index: int, to: int) -> None:
        """Show another kept version (0-based) of the last reply, or another branch of an edited
        message."""
        conv = self.shown()
        msgs = conv.messages
        if 0 <= index < len(msgs) and msgs[index].role == "user":
            self.show_branch(index, to)
            return
        if self.busy() or index != len(msgs) - 1 or msgs[index].role != "assistant" or not switch(msgs[index], to):
            return
        msg, widget = msgs[index], self.view.widget_at(index)
        if widget is None:
            return
        self.speech.silence()
        self._save(conv)
        widget.set_text(msg.content)
        widget.request_id = None  # its own (a version's spoken audio), from its stats
        widget.set_stats(msg.stats)
        widget.set_versions(msg.shown, count(msg))
        widget.set_voice_state(VoiceState.NONE)
        self.speech.refresh()
        self.refresh_list()
        self.say(f"Showing version {msg.shown + 1} of {count(msg)} of the reply")

    def show_branch(self, index: int, to: int) -> None:
        """Show branch `to` (0-based) of the edited user message `index`: the messages after it
        become that branch's; the next turn continues from them."""
        conv = self.shown()
        if self.busy() or not branches.switch(conv, index, to):
            return
        self.speech.silence()
        self._save(conv)
        self.view.clear_notice()
        self.view.show_from(index, conv.messages)
        self.speech.refresh()
        self.redraw_turn()  # a branch that ends with an unanswered message says so
        self.refresh_list()
        shown, total = branches.position(conv.messages[index])
        self.say(f"Showing branch {shown + 1} of {total} of the edited message")

    def _save(self, conv: Conversation) -> None:
        """Save the conversation after the user switched what it shows."""
        try:
            self.store.save(conv)
        except OSError as exc:
            self.say(f"Could not save the conversation: {exc.strerror or exc}")
