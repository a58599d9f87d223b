"""The turn-based chat page: conversations on the left; on the right the system prompt, the messages
(streamed, and spoken when the voice is on) and the composer. Replies run as asyncio tasks (see
turn.py) and go on while the user looks at another conversation."""

from __future__ import annotations

from typing import Any, Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QSplitter, QVBoxLayout, QWidget

from desktop.chat import branches
from desktop.chat.branches import Edit
from desktop.chat.conversations import Conversation, ConversationStore, StoredMessage
from desktop.chat.presets import PresetStore
from desktop.chat.reply import Reply
from desktop.chat.reply_versions import count, switch
from desktop.chat.search import match_index, terms
from desktop.speech.voice import Voice
from desktop.protocol.engine import EngineApi
from desktop.settings import Settings
from desktop.ui.chat.composer import Composer
from desktop.ui.chat.conversation_list import ConversationList
from desktop.ui.chat.message_view import MessageView
from desktop.ui.chat.message_widget import VoiceState
from desktop.ui.chat.notice import QueueBanner
from desktop.ui.chat.page_actions import PageActions
from desktop.ui.chat.preset_bar import PresetBar
from desktop.ui.chat.turn import Turns
from desktop.ui.chat.voice_control import ChatVoice


class ChatPage(PageActions, QWidget):
    """`current_conversation_id` is None while a new conversation has no message yet (it is saved,
    and listed, with its first message); `conversation_changed` then carries "". `voice_toggled`:
    the user turned the voice on or off (save it as settings.voice_enabled). `busy_changed`: the
    shown conversation's reply started or ended (or another conversation is shown)."""

    status = Signal(str)
    conversation_changed = Signal(str)
    busy_changed = Signal(bool)
    voice_toggled = Signal(bool)

    def __init__(self, gateway: EngineApi, store: ConversationStore, settings: Callable[[], Settings], *,
                 supports_images: bool = False, presets: PresetStore | None = None,
                 voice: Voice | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.gateway, self.store, self.settings = gateway, store, settings
        self.presets = presets if presets is not None else PresetStore(store.root.parent)
        # Called with each engine Reply as it starts (on this thread), e.g. the chat recorder.
        self.reply_observers: list[Callable[[Any], None]] = []
        self.turns = Turns(self)
        self.tasks = self.turns.tasks
        self._busy = False
        self._edit_index: int | None = None
        self.conv: Conversation = self._draft()

        self.conversations = ConversationList()
        self.preset_bar = PresetBar(self.presets)
        self.view = MessageView()
        self.queue_banner = QueueBanner()
        self.composer = Composer(supports_images)
        self.speech = ChatVoice(self.view, settings().voice_enabled, self)
        self.composer.add_tool(self.speech.button)
        right = QWidget()
        column = QVBoxLayout(right)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(0)
        column.addWidget(self.preset_bar)
        column.addWidget(self.view, 1)
        bottom = QVBoxLayout()
        bottom.setContentsMargins(16, 6, 16, 12)
        bottom.setSpacing(6)
        bottom.addWidget(self.queue_banner)
        bottom.addWidget(self.composer)
        column.addLayout(bottom)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(self.conversations)
        splitter.addWidget(right)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([260, 840])
        splitter.setChildrenCollapsible(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(splitter)
        self._connect()
        self.speech.set_voice(voice)
        self.refresh_list()
        last = settings().last_conversation_id
        if not (last and self.open_conversation(last)):
            self._show()

    def _connect(self) -> None:
        lst, view, composer = self.conversations, self.view, self.composer
        lst.selected.connect(self._open_found)
        lst.new_requested.connect(self.new_conversation)
        lst.search_changed.connect(self._search_changed)
        lst.search.left.connect(self.focus_composer)
        lst.rename_requested.connect(self.rename)
        lst.delete_requested.connect(self.delete)
        lst.export_requested.connect(self.export)
        view.edit_requested.connect(self.edit)
        view.regenerate_requested.connect(lambda _i: self.regenerate())
        view.retry_requested.connect(self.retry)
        view.continue_requested.connect(lambda _i: self.continue_reply())
        view.version_requested.connect(self.show_version)
        view.copied.connect(lambda: self.status.emit("Copied to the clipboard"))
        view.earlier_shown.connect(self.speech.refresh)  # Replay on the replies drawn now
        composer.send_requested.connect(self.send)
        composer.refused.connect(self.status)
        composer.stop_requested.connect(self.stop)
        composer.edit_cancelled.connect(self._cancel_edit)
        self.queue_banner.cancel_requested.connect(self.stop)
        self.preset_bar.changed.connect(self._preset_changed)
        self.preset_bar.status.connect(self.status)
        self.speech.status.connect(self.status)
        self.speech.toggled.connect(self.voice_toggled)
        composer.edit.escape.connect(self.speech.silence)

    # ------------------------------------------------------------------ for the main window

    @property
    def current_conversation_id(self) -> str | None:
        return self.conv.id if self.conv.id in self.store else None

    @property
    def busy(self) -> bool:
        """Whether the shown conversation's reply is being written."""
        return self.reply is not None

    @property
    def reply(self) -> Reply | None:
        """The shown conversation's reply being written, if any."""
        return self.turns.of(self.conv.id)

    def new_conversation(self) -> None:
        self._leave()
        self.conv = self._draft()
        self._show()
        self.conversations.select(None)
        self.conversation_changed.emit("")
        self.focus_composer()

    def open_conversation(self, conv_id: str) -> bool:
        """Show a saved conversation; False when there is none with this id."""
        conv = self.store.get(conv_id)
        if conv is None:
            return False
        if conv is not self.conv:
            self._leave()
            self.conv = conv
            self._show()
            self.conversation_changed.emit(conv.id)
        self.conversations.select(conv.id)
        return True

    def _open_found(self, conv_id: str) -> None:
        """Open the conversation picked in the list; while searching, at the message the search
        found (the one its snippet shows), the words marked in every message."""
        if not self.open_conversation(conv_id):
            return
        words = terms(self.conversations.search.text())
        self.view.highlight(words)
        index = match_index(self.conv.messages, words) if words else None
        if index is not None:
            self.view.reveal(index)

    def _search_changed(self, text: str) -> None:
        self.refresh_list()
        if not text.strip():
            self.view.highlight([])  # the search is over: no words marked

    def stop(self) -> None:
        """Stop the shown conversation's reply (or leave the queue) and its voice; the text is kept."""
        self.speech.silence()
        self.turns.stop(self.conv.id)

    async def shutdown(self) -> None:
        """End every reply (what was written is saved, marked interrupted so that it can be
        continued) and wait for every task of the page; call before closing the gateway."""
        self._leave()
        await self.turns.stop_all()
        await self.tasks.wait()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_Escape and (self.busy or self.speech.voice_playing):
            self.stop()
            return
        super().keyPressEvent(event)

    # ------------------------------------------------------------------ turns

    def send(self, text: str, images: list | None = None) -> None:
        """Send a user message (from the composer); after Edit it starts a new branch there."""
        if self.busy:
            return
        try:  # copied into the conversations' own storage first: the message never points elsewhere
            paths = [str(self.store.images.add(image)) for image in images or []]
        except OSError as exc:
            self.status.emit(f"The images could not be saved ({exc.strerror or exc}); nothing was sent.")
            self.composer.edit.setPlainText(text)  # the text is not lost
            return
        edit = None
        if self._edit_index is not None:
            edit = self._branch(self._edit_index, text, paths)
            if edit is None:
                return
        else:
            new = self.conv.id not in self.store
            self.conv.messages.append(StoredMessage("user", text, images=paths))
            self.store.save(self.conv)  # the user's message is on disk before the model sees it
            self.view.clear_notice()
            self.view.append("user", text, images=paths)
            self._preset_editable(False)
            self.refresh_list()
            if new:
                self.conversation_changed.emit(self.conv.id)
        self.turns.start(self.conv, edit=edit)

    def _branch(self, index: int, text: str, paths: list[str]) -> Edit | None:
        """Sending an edit: a new branch of this conversation at message `index` (the one shown until
        now is kept, ‹ › on the message goes back to it), saved before the model sees it. None
        when it could not be (the conversation stays as it was, the text in the box)."""
        try:
            edit = branches.edit(self.conv, index, text, paths)
        except ValueError as exc:  # the message is gone meanwhile: a bug, said, nothing lost
            self.status.emit(str(exc))
            self.composer.edit.setPlainText(text)
            return None
        try:
            self.store.save(self.conv)
        except OSError as exc:
            branches.undo(self.conv, edit)
            self.status.emit(f"The edit could not be saved ({exc.strerror or exc}); nothing was sent.")
            self.composer.edit.setPlainText(text)
            return None
        self._cancel_edit()
        self.composer.end_edit()
        self.view.clear_notice()
        self.view.show_from(index, self.conv.messages)
        self.refresh_list()
        shown, total = branches.position(self.conv.messages[index])
        self.status.emit(f"Edited: branch {shown + 1} of {total} of this message (‹ › on it switches)")
        return edit

    def regenerate(self) -> None:
        """Write the last reply again; the old one comes back if no new reply arrives."""
        msgs = self.conv.messages
        if self.busy or not msgs or msgs[-1].role != "assistant":
            return
        previous = msgs.pop()
        self.view.truncate(len(msgs))
        self.view.clear_notice()
        self.turns.start(self.conv, previous)

    def show_version(self, index: int, to: int) -> None:
        """Show another kept version (0-based) of the last reply, or another branch of an edited
        message; the conversation goes on from it."""
        msgs = self.conv.messages
        if 0 <= index < len(msgs) and msgs[index].role == "user":
            self.show_branch(index, to)
            return
        if self.busy or index != len(msgs) - 1 or msgs[index].role != "assistant" or not switch(msgs[index], to):
            return
        msg, widget = msgs[index], self.view.widget_at(index)
        if widget is None:
            return
        self.speech.silence()
        self._save_shown()
        widget.set_text(msg.content)
        widget.request_id = None  # its own (a version's spoken audio), from its stats
        widget.set_stats(msg.stats)
        widget.set_versions(msg.shown, count(msg))
        widget.set_voice_state(VoiceState.NONE)
        self.speech.refresh()
        self.refresh_list()
        self.status.emit(f"Showing version {msg.shown + 1} of {count(msg)} of the reply")

    def _save_shown(self) -> None:
        """Save the conversation after the user switched what it shows (a version, a branch)."""
        try:
            self.store.save(self.conv)
        except OSError as exc:
            self.status.emit(f"Could not save the conversation: {exc.strerror or exc}")

    def show_branch(self, index: int, to: int) -> None:
        """Show branch `to` (0-based) of the edited user message `index`: the messages after it
        become that branch's; the next turn continues from them."""
        if self.busy or not branches.switch(self.conv, index, to):
            return
        self.speech.silence()
        self._save_shown()
        self.view.clear_notice()
        self.view.show_from(index, self.conv.messages)
        self.speech.refresh()
        self.turns.show()  # a branch that ends with an unanswered message says so
        self.refresh_list()
        shown, total = branches.position(self.conv.messages[index])
        self.status.emit(f"Showing branch {shown + 1} of {total} of the edited message")

    def retry(self) -> None:
        """After a failed, stopped or interrupted turn: ask again."""
        if self.busy or not self.conv.messages:
            return
        self.view.clear_notice()
        if self.conv.messages[-1].role == "assistant":
            self.regenerate()
        else:
            self.turns.start(self.conv)

    def continue_reply(self) -> None:
        """Go on writing the last reply (interrupted) from where it stopped."""
        msgs = self.conv.messages
        if self.busy or not msgs or msgs[-1].role != "assistant":
            return
        self.view.clear_notice()
        self.turns.start(self.conv, continuing=True)

    def set_busy(self, busy: bool) -> None:
        """The composer's Stop, and message actions that wait, follow the shown conversation."""
        self.composer.set_streaming(busy)
        self.view.set_busy(busy)
        if busy != self._busy:
            self._busy = busy
            self.busy_changed.emit(busy)
