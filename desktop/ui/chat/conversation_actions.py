"""The chat page's conversation housekeeping: the list (filtered by the search box, opening a
conversation at the message found), rename, delete and export, from the list's context menu or
from the menu bar (and F2) on the open conversation."""

from __future__ import annotations

from typing import Callable

from PySide6.QtWidgets import QWidget

from desktop.chat import export as exporter
from desktop.chat.conversations import Conversation, ConversationStore
from desktop.chat.search import match_index, terms
from desktop.ui.chat import dialogs
from desktop.ui.chat.conversation_list import ConversationList
from desktop.ui.chat.message_view import MessageView
from desktop.ui.chat.turn import Turns
from desktop.tasks import TaskSet


class ConversationActions:
    """`shown()`: the conversation the page shows; `open_conversation(id) -> bool` and
    `new_conversation()` show another one in place of a deleted one; `parent` owns the dialogs."""

    def __init__(self, store: ConversationStore, rows: ConversationList, view: MessageView, turns: Turns,
                 tasks: TaskSet, parent: QWidget, *, shown: Callable[[], Conversation], say: Callable[[str], None],
                 open_conversation: Callable[[str], bool], new_conversation: Callable[[], None]) -> None:
        self.store, self.rows, self.view, self.turns, self.tasks = store, rows, view, turns, tasks
        self.parent = parent
        self.shown, self.say = shown, say
        self.open_conversation, self.new_conversation = open_conversation, new_conversation

    def refresh_list(self) -> None:
        """Re-read the list (filtered by the search box) with the current conversation selected."""
        query = self.rows.search.text()
        convs = self.store.find(query) if query.strip() else self.store.list()
        self.rows.set_conversations(convs, self.shown().id)

    def open_found(self, conv_id: str) -> None:
        """Open the conversation picked in the list; while searching, at the message the search
        found (the one its snippet shows), the words marked in every message."""
        if not self.open_conversation(conv_id):
            return
        words = terms(self.rows.search.text())
        self.view.highlight(words)
        index = match_index(self.shown().messages, words) if words else None
        if index is not None:
            self.view.reveal(index)

    def search_changed(self, text: str) -> None:
        self.refresh_list()
        if not text.strip():
            self.view.highlight([])  # the search is over: no words marked

    # The menu bar's conversation actions (and F2) act on the open conversation; one not saved yet
    # (no message) is not in the list: they say so instead of doing nothing.

    def rename_current(self) -> None:
        if self._saved_current("rename"):
            conv_id = self.shown().id
            if self.rows.model.row_of(conv_id) < 0:  # hidden by the search
                self.rows.search.clear()
            self.rows.start_rename(conv_id)

    def delete_current(self) -> None:
        if self._saved_current("delete"):
            self.delete(self.shown().id)

    def export_current(self) -> None:
        if self._saved_current("export"):
            self.export(self.shown().id)

    def _saved_current(self, verb: str) -> bool:
        if self.shown().id in self.store:
            return True
        self.say(f"Nothing to {verb} yet: this conversation starts with its first message.")
        return False

    def rename(self, conv_id: str, title: str) -> None:
        try:
            self.store.rename(conv_id, title)
        except (KeyError, ValueError) as exc:
            self.say(str(exc).strip("'\""))
            return
        self.refresh_list()
        self.say(f"Renamed to “{title}”")

    def delete(self, conv_id: str, *, confirmed: bool = False) -> None:
        """Delete a conversation after asking; in place of the open one the next in the list opens
        (the previous one after the last; a new conversation when none is left). A reply being
        written to it is cancelled first."""
        conv = self.store.get(conv_id)
        if conv is None:
            return
        if not confirmed:
            dialogs.confirm_delete(self.parent, conv.title, lambda: self.delete(conv_id, confirmed=True))
            return
        if conv is self.shown():
            neighbour = self.rows.neighbour_of(conv_id)
            if not (neighbour and self.open_conversation(neighbour)):
                self.new_conversation()
        if self.turns.of(conv_id) is not None:
            self.tasks.spawn(self._delete_after_reply(conv))
            return
        self.store.delete(conv_id)
        self.refresh_list()
        self.say(f"Deleted “{conv.title}”")

    async def _delete_after_reply(self, conv: Conversation) -> None:
        await self.turns.forget(conv.id)
        self.store.delete(conv.id)
        self.refresh_list()
        self.say(f"Deleted “{conv.title}” (its reply was cancelled)")

    def export(self, conv_id: str, path: str | None = None) -> None:
        """Export as Markdown or JSON (by the file's suffix); asks where unless `path` is given."""
        conv = self.store.get(conv_id)
        if conv is None:
            return
        path = path or dialogs.ask_export_path(self.parent, conv.title)
        if not path:
            return
        try:
            written = exporter.export(conv, path)
        except OSError as exc:
            self.say(f"Could not export: {exc.strerror or exc}")
            return
        self.say(f"Exported “{conv.title}” to {written}")
