"""A message the model refused goes back into the text box instead of staying in the conversation
unanswered (so refused messages never pile up): one too long by itself, one that no longer fits the
conversation's full window, and an edit whose branch got no reply (the branch before comes back)."""

from __future__ import annotations

import asyncio
from typing import Callable

from desktop.chat.conversations import Conversation, ConversationStore
from desktop.chat.reply import Reply
from desktop.chat.reply_limit import WINDOW_ADVICE
from desktop.ui.chat.editing import Editing
from desktop.ui.chat.message_view import MessageView
from desktop.ui.chat.notice import FRIENDLY, in_user_terms, over, too_long
from desktop.tasks import TaskSet

REFUSED = "context_length_exceeded"  # the worker's refusal of a prompt longer than its window


def wanted(reply: Reply) -> bool:
    """Whether this ended reply's message goes back into the text box."""
    if reply.undone is not None:
        return True
    conv = reply.conv
    return (reply.error is not None and reply.error[0] == REFUSED and reply.previous is None and not reply.continuing
            and bool(conv.messages) and conv.messages[-1].role == "user")


def window_full(detail: str) -> tuple[str, str]:
    """The sentence and the detail for a message that does not fit after the conversation."""
    numbers = over(detail)
    if numbers is None:
        return "This message does not fit: the conversation has filled the model's window.", ""
    total, limit = numbers
    return (f"This message does not fit: the conversation has filled the model's window ({limit:,} tokens).",
            f"With it, the conversation would be {total:,} tokens long.")


class TakeBack:
    """Gives refused messages back to the text box (`editing`): at once for the shown conversation,
    else when that conversation is shown again (`pending`). `given()` follows each message given
    back; `unsaved(conv)` follows a conversation deleted again because nothing is left in it."""

    def __init__(self, store: ConversationStore, view: MessageView, editing: Editing, tasks: TaskSet, *,
                 say: Callable[[str], None], given: Callable[[], None],
                 unsaved: Callable[[Conversation], None]) -> None:
        self.store, self.view, self.editing, self.tasks = store, view, editing, tasks
        self.say, self.given, self.unsaved = say, given, unsaved
        self._later: dict[str, tuple[Reply, asyncio.Task | None]] = {}

    def later(self, reply: Reply, run: asyncio.Task | None) -> None:
        self._later[reply.conv.id] = (reply, run)

    def pending(self, conv_id: str) -> bool:
        return conv_id in self._later

    def due(self, conv_id: str) -> None:
        """The conversation is shown: give back what was refused while it was not."""
        reply, run = self._later.pop(conv_id, (None, None))
        if reply is not None:
            self.now(reply, run)

    def forget(self, conv_id: str) -> None:
        self._later.pop(conv_id, None)

    def now(self, reply: Reply, run: asyncio.Task | None) -> None:
        conv = reply.conv
        if reply.undone is not None:
            self._edit(reply)
            return
        detail = reply.error[1] if reply.error else ""
        shown = in_user_terms(detail, conv)  # while the message is still in it
        message = reply.take_back()
        if message is None:  # changed meanwhile: nothing to give back
            return
        request = len(conv.system_prompt) + sum(len(m.content) for m in conv.messages) + len(message.content)
        sentence = too_long(detail, len(message.content), request, alone=not conv.messages)
        if sentence is not None:
            text = sentence + " It is back in the text box: shorten it or send it in parts."
            detail = shown
        else:
            head, detail = window_full(detail)
            text = f"{head} It is back in the text box. {WINDOW_ADVICE}"
        if conv.messages:
            self.store.save(conv)  # a newer version than the reply's last write: it wins on disk
        else:  # nothing left: a new conversation again, unsaved (once the reply's write is done)
            conv.title = ""
            self.tasks.spawn(self._unsave(conv, run))
        self.view.show_from(len(conv.messages), conv.messages)
        self.view.show_notice(text, detail, error=True, retry=False)
        self._give(message.content, message.images)
        self.say("The message was not sent: it is too long for the model" if sentence is not None
                 else "The message was not sent: the conversation is full")

    def _edit(self, reply: Reply) -> None:
        """The engine took the edit back (Reply.undone): the text goes back into the box, still an
        edit of the same message, and the conversation shows what it showed before."""
        conv, edit = reply.conv, reply.edit
        message = reply.undone
        if edit is None or message is None or edit.index >= len(conv.messages):
            return
        code, detail, _retryable = reply.error or ("", "", False)
        if code == REFUSED:
            request = len(conv.system_prompt) + sum(len(m.content) for m in conv.messages[:edit.index]) + len(message.content)
            head = too_long(detail, len(message.content), request, alone=edit.index == 0)
            if head is None:
                head, detail = window_full(detail)
        else:
            head = FRIENDLY.get(code, "The assistant could not answer.")
        self.view.show_from(edit.index, conv.messages)
        self.view.show_notice(f"{head} The edit was not kept; it is back in the text box, and the conversation "
                              "is as it was.", detail, error=True, retry=False)
        original = conv.messages[edit.index]
        self._give(message.content, [p for p in message.images if p not in original.images], edit=edit.index)
        self.say("The edit could not be answered: it is back in the text box")

    def _give(self, text: str, images: list[str], edit: int | None = None) -> None:
        self.editing.give_back(text, images, edit)
        self.given()

    async def _unsave(self, conv: Conversation, run: asyncio.Task | None) -> None:
        if run is not None:
            await asyncio.wait([run])  # its task has written the conversation for the last time
        if not conv.messages and conv.id in self.store:
            self.store.delete(conv.id)
            self.unsaved(conv)
