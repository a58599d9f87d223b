"""Editing a user message: Edit puts it into the composer; sending it makes a new branch of the
conversation there (chat/branches.py), saved before the model sees it. A message the model refused
comes back into the composer here too (take_back.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from desktop.chat import branches
from desktop.chat.branches import Edit
from desktop.chat.conversations import Conversation, ConversationStore
from desktop.chat.reply import Reply
from desktop.ui.chat.composer import Composer
from desktop.ui.chat.message_view import MessageView


class Editing:
    """Which user message the composer edits (`index`; None while it writes a new message)."""

    def __init__(self, composer: Composer, store: ConversationStore, view: MessageView, *,
                 say: Callable[[str], None], refresh_list: Callable[[], None]) -> None:
        self.composer, self.store, self.view = composer, store, view
        self.say, self.refresh_list = say, refresh_list
        self.index: int | None = None

    def start(self, index: int, text: str) -> None:
        self.index = index
        self.composer.start_edit(text)

    def cancel(self) -> None:
        if self.index is not None:
            self.index = None
            self.composer.cancel_edit()

    def end(self) -> None:
        """Drop an unfinished edit and leave the composer's edit mode."""
        self.cancel()
        self.composer.end_edit()

    def branch(self, conv: Conversation, text: str, paths: list[str]) -> Edit | None:
        """Sending the edit: a new branch of `conv` at the edited message (the one shown until now
        is kept, ‹ › on the message goes back to it), saved before the model sees it. None when it
        could not be (the conversation stays as it was, the text in the box)."""
        assert self.index is not None
        index = self.index
        try:
            edit = Reply.ask_edited(self.store, conv, index, text, paths)
        except ValueError as exc:  # the message is gone meanwhile: a bug, said, nothing lost
            self.say(str(exc))
            self.composer.edit.setPlainText(text)
            return None
        except OSError as exc:
            self.say(f"The edit could not be saved ({exc.strerror or exc}); nothing was sent.")
            self.composer.edit.setPlainText(text)
            return None
        self.end()
        self.view.clear_notice()
        self.view.show_from(index, conv.messages)
        self.refresh_list()
        shown, total = branches.position(conv.messages[index])
        self.say(f"Edited: branch {shown + 1} of {total} of this message (‹ › on it switches)")
        return edit

    def give_back(self, text: str, images: list[str], edit: int | None = None) -> None:
        """Put a refused message back into the text box, before what is there; `edit`: it is still
        an edit of that message."""
        box = self.composer.edit
        if edit is not None:
            self.start(edit, text + ("\n\n" + box.toPlainText() if box.toPlainText().strip() else ""))
        else:
            box.setPlainText(text + ("\n\n" + box.toPlainText() if box.toPlainText().strip() else ""))
        if images:
            self.composer.add_images([(Path(p).name, None, p) for p in images])
        box.moveCursor(box.textCursor().MoveOperation.End)
