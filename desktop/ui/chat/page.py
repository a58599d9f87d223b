"""The turn-based chat page: conversations on the left; on the right the system prompt, the messages
(streamed, and spoken when the voice is on) and the composer. Gateway calls run as asyncio tasks."""

from __future__ import annotations

from typing import Any, Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QSplitter, QVBoxLayout, QWidget

from desktop.engine.conversations import Conversation, ConversationStore, StoredMessage
from desktop.engine.export import stats_line
from desktop.engine.presets import PresetStore
from desktop.engine.voice import Voice
from desktop.settings import Settings
from desktop.ui.chat.composer import Composer
from desktop.ui.chat.conversation_list import ConversationList
from desktop.ui.chat.message_view import MessageView
from desktop.ui.chat.message_widget import MessageWidget
from desktop.ui.chat.notice import QueueBanner, friendly
from desktop.ui.chat.page_actions import PageActions
from desktop.ui.chat.preset_bar import PresetBar
from desktop.ui.chat.turn import Tasks, Turn
from desktop.ui.chat.voice_control import ChatVoice


class ChatPage(PageActions, QWidget):
    """`current_conversation_id` is None while a new conversation has no message yet (it is saved,
    and listed, with its first message); `conversation_changed` then carries "". `voice_toggled`:
    the user turned the voice on or off (save it as settings.voice_enabled)."""

    status = Signal(str)
    conversation_changed = Signal(str)
    busy_changed = Signal(bool)
    voice_toggled = Signal(bool)

    def __init__(self, gateway: Any, store: ConversationStore, settings: Callable[[], Settings], *,
                 supports_images: bool = False, presets: PresetStore | None = None,
                 voice: Voice | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.gateway, self.store, self.settings = gateway, store, settings
        self.presets = presets if presets is not None else PresetStore(store.root.parent)
        self.tasks = Tasks()
        self.turn: Turn | None = None
        self._reply: MessageWidget | None = None
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
        lst.selected.connect(self.open_conversation)
        lst.new_requested.connect(self.new_conversation)
        lst.search_changed.connect(lambda _text: self.refresh_list())
        lst.rename_requested.connect(self.rename)
        lst.delete_requested.connect(self.delete)
        lst.export_requested.connect(self.export)
        view.edit_requested.connect(self.edit)
        view.regenerate_requested.connect(lambda _i: self.regenerate())
        view.retry_requested.connect(self.retry)
        view.copied.connect(lambda: self.status.emit("Copied to the clipboard"))
        composer.send_requested.connect(self.send)
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
        return self.turn is not None

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

    def stop(self) -> None:
        """Stop the reply being written (or leave the queue) and its voice; the text is kept."""
        self.speech.silence()
        if self.turn is not None:
            self.tasks.spawn(self.turn.stop())

    def set_gateway(self, gateway: Any) -> None:
        """Use another gateway (after the model was reloaded); a running reply is stopped."""
        self._leave()
        self.gateway = gateway

    async def shutdown(self) -> None:
        """Stop the running reply (its partial text is saved) and wait for every task of the page;
        call before closing the gateway."""
        self._leave()
        await self.tasks.wait()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_Escape and (self.turn is not None or self.speech.voice_playing):
            self.stop()
            return
        super().keyPressEvent(event)

    # ------------------------------------------------------------------ turns

    def send(self, text: str, images: list | None = None) -> None:
        """Send a user message (from the composer); after Edit it starts a new branch."""
        if self.turn is not None:
            return
        if self._edit_index is not None:
            conv = self.store.fork(self.conv, self._edit_index, text)
            self._cancel_edit()
            self.conv = conv
            self._show()
            self.refresh_list()
            self.conversation_changed.emit(conv.id)
            self.status.emit("Started a new branch from the edited message")
        else:
            new = self.conv.id not in self.store
            self.conv.messages.append(StoredMessage("user", text, images=list(images or [])))
            self.store.save(self.conv)  # the user's message is on disk before the model sees it
            self.view.clear_notice()
            self.view.append("user", text)
            self._preset_editable(False)
            self.refresh_list()
            if new:
                self.conversation_changed.emit(self.conv.id)
        self._start()

    def regenerate(self) -> None:
        """Write the last reply again; the old one comes back if no new reply arrives."""
        msgs = self.conv.messages
        if self.turn is not None or not msgs or msgs[-1].role != "assistant":
            return
        previous = msgs.pop()
        self.view.truncate(len(msgs))
        self.view.clear_notice()
        self._start(previous)

    def retry(self) -> None:
        """After a failed or stopped turn: ask again."""
        if self.turn is not None or not self.conv.messages:
            return
        self.view.clear_notice()
        if self.conv.messages[-1].role == "assistant":
            self.regenerate()
        else:
            self._start()

    def _start(self, previous: StoredMessage | None = None) -> None:
        self.speech.silence()
        self.turn = Turn(self.gateway, self.conv, self.settings().sampling(), self, previous)
        self._reply = None
        self._set_busy(True)
        self.tasks.spawn(self._run(self.turn))

    async def _run(self, turn: Turn) -> None:
        try:
            await turn.run()
        except Exception:  # a bug, not a model error: never leave the page stuck in "Stop"
            if not turn.ended:
                self.turn_failed(turn, "internal", "", True)
            raise  # reported by Tasks through sys.excepthook

    # TurnListener: events of a turn; a turn the user switched away from (detached) only saves.

    def turn_loading(self, turn: Turn) -> None:
        if turn is self.turn and self.queue_banner.isHidden():
            self.queue_banner.show_loading()

    def turn_queued(self, turn: Turn, position: int, eta_s: float) -> None:
        if turn is self.turn:
            self.queue_banner.show_position(position, eta_s)

    def turn_started(self, turn: Turn) -> None:
        if turn is self.turn:
            self.queue_banner.hide()
            self._reply_widget()

    def turn_text(self, turn: Turn, text: str) -> None:
        if turn is self.turn:
            reply = self._reply_widget()
            reply.set_text(text)
            self.speech.reply_text(turn.request_id, reply, text)

    def turn_done(self, turn: Turn, text: str, stats: dict[str, Any]) -> None:
        conv = turn.conv
        if turn.request_id:
            stats = {**stats, "request_id": turn.request_id}  # ties the reply to its spoken audio
        if text:
            conv.messages.append(StoredMessage("assistant", text, stats))
        elif turn.previous is not None:
            conv.messages.append(turn.previous)
        if text and conv.id in self.store:  # not deleted meanwhile
            self.store.save(conv)
        if turn is not self.turn:
            return
        if text:
            reply = self._reply_widget()
            reply.set_text(text)
            reply.set_stats(stats)
            reply.set_streaming(False)
            self.speech.reply_done(turn.request_id, reply, text)
            self.status.emit("Reply: " + stats_line(stats))
        else:
            self.speech.reply_dropped(turn.request_id)
            self._drop_reply(turn)
            waited = stats.get("generated_tokens", 0) == 0 and stats.get("input_tokens", 0) == 0
            what = "You left the queue" if waited else "Stopped"
            self.view.show_notice(f"{what} before the assistant replied.", error=False, retry=True)
        self._end_turn()
        self.refresh_list()

    def turn_failed(self, turn: Turn, code: str, message: str, retryable: bool) -> None:
        if turn.previous is not None:
            turn.conv.messages.append(turn.previous)
        if turn is not self.turn:
            return
        self.speech.reply_dropped(turn.request_id)
        self._drop_reply(turn)
        head, detail = friendly(code, message, retryable)
        self.view.show_notice(head, detail, error=True, retry=retryable)
        self.status.emit("The assistant could not answer")
        self._end_turn()

    def _reply_widget(self) -> MessageWidget:
        if self._reply is None:
            self._reply = self.view.append("assistant", "")
            self._reply.set_streaming(True)
        return self._reply

    def _drop_reply(self, turn: Turn) -> None:
        count = len(turn.conv.messages)
        if turn.previous is not None:
            self.view.truncate(count - 1)
            self.view.append("assistant", turn.previous.content, turn.previous.stats)
        else:
            self.view.truncate(count)
        self._reply = None
        self.speech.refresh()

    def _end_turn(self) -> None:
        self.turn, self._reply = None, None
        self.queue_banner.hide()
        self._set_busy(False)

    def _set_busy(self, busy: bool) -> None:
        self.composer.set_streaming(busy)
        self.view.set_busy(busy)
        self.busy_changed.emit(busy)
