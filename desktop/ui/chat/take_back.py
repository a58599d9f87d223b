"""A message the model refused goes back into the text box instead of staying in the conversation
unanswered (so refused messages never pile up): one too long by itself, one that no longer fits the
conversation's full window, and an edit whose branch got no reply (the branch before comes back)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from desktop.chat.conversations import Conversation
from desktop.chat.reply import Reply
from desktop.chat.reply_limit import WINDOW_ADVICE
from desktop.ui.chat.notice import FRIENDLY, in_user_terms, over, too_long

if TYPE_CHECKING:
    from desktop.ui.chat.page import ChatPage
    from desktop.ui.tasks import Tasks

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
    """Gives refused messages back to `page`'s text box: at once for the shown conversation, else
    when that conversation is shown again (`pending`)."""

    def __init__(self, page: ChatPage, tasks: Tasks) -> None:
        self.page, self.tasks = page, tasks
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
        page, conv = self.page, reply.conv
        if reply.undone is not None:
            self._edit(reply)
            return
        if not conv.messages or conv.messages[-1].role != "user":  # changed meanwhile: nothing to give back
            return
        detail = reply.error[1] if reply.error else ""
        shown = in_user_terms(detail, conv)  # while the message is still in it
        message = conv.messages.pop()
        request = len(conv.system_prompt) + sum(len(m.content) for m in conv.messages) + len(message.content)
        sentence = too_long(detail, len(message.content), request, alone=not conv.messages)
        if sentence is not None:
            text = sentence + " It is back in the text box: shorten it or send it in parts."
            detail = shown
        else:
            head, detail = window_full(detail)
            text = f"{head} It is back in the text box. {WINDOW_ADVICE}"
        if conv.messages:
            page.store.save(conv)  # a newer version than the reply's last write: it wins on disk
        else:  # nothing left: a new conversation again, unsaved (once the reply's write is done)
            conv.title = ""
            self.tasks.spawn(self._unsave(conv, run))
        page.view.show_from(len(conv.messages), conv.messages)
        page.view.show_notice(text, detail, error=True, retry=False)
        self._give(message.content, message.images)
        page.status.emit("The message was not sent: it is too long for the model" if sentence is not None
                         else "The message was not sent: the conversation is full")

    def _edit(self, reply: Reply) -> None:
        """The engine took the edit back (Reply.undone): the text goes back into the box, still an
        edit of the same message, and the conversation shows what it showed before."""
        page, conv, edit = self.page, reply.conv, reply.edit
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
        page.view.show_from(edit.index, conv.messages)
        page.view.show_notice(f"{head} The edit was not kept; it is back in the text box, and the conversation "
                              "is as it was.", detail, error=True, retry=False)
        original = conv.messages[edit.index]
        self._give(message.content, [p for p in message.images if p not in original.images], edit=edit.index)
        page.status.emit("The edit could not be answered: it is back in the text box")

    def _give(self, text: str, images: list[str], edit: int | None = None) -> None:
        page = self.page
        page._preset_editable(not page.conv.messages)
        box = page.composer.edit
        if edit is not None:
            page._edit_index = edit
            page.composer.start_edit(text + ("\n\n" + box.toPlainText() if box.toPlainText().strip() else ""))
        else:
            box.setPlainText(text + ("\n\n" + box.toPlainText() if box.toPlainText().strip() else ""))
        if images:
            page.composer.add_images([(Path(p).name, None, p) for p in images])
        box.moveCursor(box.textCursor().MoveOperation.End)
        page.focus_composer()
        page.refresh_list()

    async def _unsave(self, conv: Conversation, run: asyncio.Task | None) -> None:
        if run is not None:
            await asyncio.wait([run])  # its task has written the conversation for the last time
        page = self.page
        if not conv.messages and conv.id in page.store:
            page.store.delete(conv.id)
            page.refresh_list()
            if conv is page.conv:
                page.conversation_changed.emit("")
