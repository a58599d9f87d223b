"""The turn-based chat page: conversations on the left; on the right the system prompt, the messages
(streamed, and spoken when the voice is on) and the composer. Replies run as asyncio tasks (see
turn.py) and go on while the user looks at another conversation. The page lays its parts out and
wires them; the work is theirs: Turns (the replies), Editing (an edited message and its branch),
Versions (switching versions and branches), ConversationActions (the list, rename, delete, export)."""

from __future__ import annotations

from typing import Any, Callable

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QSplitter, QVBoxLayout, QWidget

from desktop.chat.conversations import Conversation, ConversationStore, StoredMessage
from desktop.chat.draft_warm import DraftWarmer
from desktop.chat.presets import PresetStore
from desktop.chat.reply import Reply
from desktop.speech.voice import Voice
from desktop.protocol.engine import EngineApi
from desktop.settings import Settings
from desktop.ui.chat.composer import Composer
from desktop.ui.chat.window_view import WindowMeter, window_use
from desktop.ui.chat.conversation_actions import ConversationActions
from desktop.ui.chat.conversation_list import ConversationList
from desktop.ui.chat.editing import Editing
from desktop.ui.chat.message_view import MessageView
from desktop.ui.chat.notice import QueueBanner
from desktop.ui.chat.preset_bar import PresetBar
from desktop.ui.chat.preset_voice import settings_voice
from desktop.ui.chat.take_back import TakeBack
from desktop.ui.chat.tool_turns import ToolTurns, tools_switch
from desktop.ui.chat.turn import Turns
from desktop.ui.chat.versions import Versions
from desktop.ui.chat.voice_control import ChatVoice
from desktop.tasks import TaskSet

TYPING_PAUSE_MS = 500  # typing stopped this long: the draft is prefilled (draft_warm.py)


def lay_out(conversations: QWidget, preset_bar: QWidget, view: QWidget, banner: QWidget,
            composer: QWidget, meter: QWidget | None = None) -> QSplitter:
    """The list on the left; on the right the system prompt, the messages, the queue banner and
    the composer."""
    right = QWidget()
    column = QVBoxLayout(right)
    column.setContentsMargins(0, 0, 0, 0)
    column.setSpacing(0)
    column.addWidget(preset_bar)
    column.addWidget(view, 1)
    bottom = QVBoxLayout()
    bottom.setContentsMargins(16, 6, 16, 12)
    bottom.setSpacing(6)
    bottom.addWidget(banner)
    if meter is not None:
        bottom.addWidget(meter)
    bottom.addWidget(composer)
    column.addLayout(bottom)
    splitter = QSplitter(Qt.Orientation.Horizontal)
    splitter.addWidget(conversations)
    splitter.addWidget(right)
    splitter.setStretchFactor(1, 1)
    splitter.setSizes([260, 840])
    splitter.setChildrenCollapsible(False)
    return splitter


class ChatPage(QWidget):
    """`current_conversation_id` is None while a new conversation has no message yet (it is saved,
    and listed, with its first message); `conversation_changed` then carries "". `voice_toggled`:
    the user turned the voice on or off (save it as settings.voice_enabled). `busy_changed`: the
    shown conversation's reply started or ended (or another conversation is shown)."""

    status = Signal(str)
    conversation_changed = Signal(str)
    busy_changed = Signal(bool)
    voice_toggled = Signal(bool)
    tools_toggled = Signal(bool)  # the Tools switch: save it as settings.chat_tools

    def __init__(self, gateway: EngineApi, store: ConversationStore, settings: Callable[[], Settings], *,
                 supports_images: bool = False, presets: PresetStore | None = None,
                 voice: Voice | None = None, tools: Any = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.gateway, self.store, self.settings = gateway, store, settings
        self.toolbox = tools  # desktop.tools.manager.ToolManager (None: no tools)
        self.presets = presets if presets is not None else PresetStore(store.root.parent)
        # Called with each engine Reply as it starts (on this thread), e.g. the chat recorder.
        self.reply_observers: list[Callable[[Any], None]] = []
        self._busy = False
        self.conv: Conversation = self._draft()
        self.typing_pause = QTimer(self)  # restarted by every change of the draft
        self.typing_pause.setSingleShot(True)
        self.typing_pause.setInterval(TYPING_PAUSE_MS)

        self.conversations = ConversationList()
        self.preset_bar = PresetBar(self.presets, settings_voice=lambda: settings_voice(settings()))
        self.view = MessageView()
        self.queue_banner = QueueBanner()
        self.composer = Composer(supports_images)
        self.meter = WindowMeter()
        self.speech = ChatVoice(self.view, settings().voice_enabled, self, self.presets)
        self.composer.add_tool(self.speech.button)
        self.tools_button = tools_switch(settings().chat_tools, self.tools_toggled.emit)
        self.composer.add_tool(self.tools_button)
        self._build_parts()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(lay_out(self.conversations, self.preset_bar, self.view, self.queue_banner, self.composer, self.meter))
        self._connect()
        self.speech.set_voice(voice)
        self.refresh_list()
        last = settings().last_conversation_id
        if not (last and self.open_conversation(last)):
            self._show()

    def _build_parts(self) -> None:
        """The page's workers, each given the widgets and callables it uses."""
        say, shown, store, view = self.status.emit, lambda: self.conv, self.store, self.view

        def new_reply(conv: Conversation, **how: Any) -> Reply:  # with the gateway and settings of now
            overflow = "error" if self.settings().context_overflow == "stop" else "slide"
            return Reply(self.gateway, store, conv, self.settings().sampling(), overflow=overflow, **how)

        self.tasks = TaskSet(report_errors=True)
        self.warmer = DraftWarmer(self.gateway, self.tasks)
        self.editing = Editing(self.composer, store, view, say=say, refresh_list=self.refresh_list)
        take_back = TakeBack(store, view, self.editing, self.tasks, say=say, given=self._given_back,
                             unsaved=self._unsaved)
        tool_turns = ToolTurns(self.toolbox, store, view, shown=shown, enabled=self.tools_button.isChecked, say=say)
        self.turns = Turns(new_reply, store, view, self.queue_banner, self.speech, self.conversations, take_back,
                           self.tasks, shown=shown, say=say, set_busy=self.set_busy,
                           refresh_list=self.refresh_list, observers=self.reply_observers, tool_turns=tool_turns)
        self.versions = Versions(store, view, self.speech, shown=shown, busy=lambda: self.busy, say=say,
                                 refresh_list=self.refresh_list, redraw_turn=self.turns.show)
        self.actions = ConversationActions(store, self.conversations, view, self.turns, self.tasks, self, shown=shown,
                                           say=say, open_conversation=self.open_conversation,
                                           new_conversation=self.new_conversation)

    def _connect(self) -> None:
        lst, view, composer, actions = self.conversations, self.view, self.composer, self.actions
        lst.selected.connect(actions.open_found)
        lst.new_requested.connect(self.new_conversation)
        lst.search_changed.connect(actions.search_changed)
        lst.search.left.connect(self.focus_composer)
        lst.rename_requested.connect(actions.rename)
        lst.delete_requested.connect(actions.delete)
        lst.export_requested.connect(actions.export)
        view.edit_requested.connect(self.edit)
        view.regenerate_requested.connect(lambda _i: self.regenerate())
        view.retry_requested.connect(self.retry)
        view.continue_requested.connect(lambda _i: self.continue_reply())
        view.version_requested.connect(self.versions.show)
        view.copied.connect(lambda: self.status.emit("Copied to the clipboard"))
        view.earlier_shown.connect(self.speech.refresh)  # Replay on the replies drawn now
        composer.send_requested.connect(self.send)
        composer.edit.textChanged.connect(self.typing_pause.start)
        self.typing_pause.timeout.connect(self.warm_draft)
        composer.refused.connect(self.status)
        composer.stop_requested.connect(self.stop)
        composer.edit_cancelled.connect(self.editing.cancel)
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
        """Whether the shown conversation's reply is being written (or its tool calls run)."""
        return self.turns.busy(self.conv.id)

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

    def refresh_list(self) -> None:
        self.actions.refresh_list()
        self.show_window()

    def show_window(self) -> None:
        """The meter and the first message the model still sees, from the last reply's stats."""
        use = window_use(self.conv.messages) if self.conv is not None else None
        try:
            size = int(self.gateway.context_length() or 0)
        except Exception:  # no engine yet ("not ready"), or one that cannot say: no meter
            size = 0
        self.meter.show_use(use, size)
        self.view.mark_first_seen(use.first_seen if use is not None else 0)

    def rename_current(self) -> None:
        self.actions.rename_current()

    def delete_current(self) -> None:
        self.actions.delete_current()

    def export_current(self) -> None:
        self.actions.export_current()

    def delete(self, conv_id: str, *, confirmed: bool = False) -> None:
        self.actions.delete(conv_id, confirmed=confirmed)

    def focus_composer(self) -> None:
        self.composer.edit.setFocus()

    def focus_search(self) -> None:
        self.conversations.search.setFocus()
        self.conversations.search.selectAll()

    def set_supports_images(self, supports: bool) -> None:
        self.composer.set_supports_images(supports)

    def set_voice(self, voice: Voice | None) -> None:
        """Speak replies with this voice (None: no voice toggle)."""
        self.speech.set_voice(voice)

    def set_tools_enabled(self, on: bool) -> None:
        """Follow settings.chat_tools changed elsewhere."""
        self.tools_button.setChecked(on)

    def set_voice_enabled(self, on: bool) -> None:
        """Follow settings.voice_enabled changed elsewhere (the settings dialog)."""
        self.speech.set_enabled(on)

    def toggle_voice(self) -> None:
        self.speech.toggle()  # Ctrl+Shift+V, the menu bar's Voice item

    def voice_state(self) -> tuple[bool, bool]:
        return self.speech.state()  # (whether the Voice item can be used, whether it is on)

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
        edit, typed = None, self.warmer.sent(self.conv)
        self.typing_pause.stop()
        if self.editing.index is not None:
            edit = self.editing.branch(self.conv, text, paths)
            if edit is None:
                return
        else:
            new = self.conv.id not in self.store
            Reply.ask(self.store, self.conv, StoredMessage("user", text, images=paths))  # on disk first
            self.view.clear_notice()
            self.view.append("user", text, images=paths)
            self._preset_editable(False)
            self.refresh_list()
            if new:
                self.conversation_changed.emit(self.conv.id)
        self.turns.start(self.conv, edit=edit, typed=typed and edit is None)

    def warm_draft(self) -> None:
        """The user paused typing: prefill the draft (not while this conversation's reply is being
        written, while an earlier message is edited, with images attached, or when turned off)."""
        if self.busy or self.editing.index is not None or self.composer.images or not self.settings().prefill_while_typing:
            return
        self.warmer.warm(self.conv, self.composer.draft(), self.turns.tool_turns.specs() if self.turns.tool_turns else None)

    def edit(self, index: int) -> None:
        """Put a user message into the composer; sending it branches the conversation there."""
        if not self.busy and 0 <= index < len(self.conv.messages):
            self.editing.start(index, self.conv.messages[index].content)

    def regenerate(self) -> None:
        """Write the last reply again; the old one comes back if no new reply arrives."""
        msgs = self.conv.messages
        if self.busy or not msgs or msgs[-1].role != "assistant":
            return
        self.view.truncate(len(msgs) - 1)
        self.view.clear_notice()
        self.turns.start(self.conv, again=True)

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

    # ------------------------------------------------------------------ internals

    def _leave(self) -> None:
        """Before showing another conversation: silence the voice (only the shown conversation's
        reply is spoken; a reply written meanwhile goes on unheard) and drop an unfinished edit."""
        self.speech.silence()
        self.editing.end()

    def _draft(self) -> Conversation:
        """A new conversation with the preset chosen in the settings (unsaved until it is used)."""
        preset = self.presets.get(self.settings().system_preset) or self.presets.list()[0]
        return self.store.new(preset.prompt, preset.id)

    def _show(self) -> None:
        """Show `self.conv` from the start."""
        self.view.set_messages(self.conv.messages)
        self.speech.refresh()  # Replay on the replies whose audio is still kept
        self._preset_editable(not self.conv.messages)
        self.turns.show()  # its reply, if one is being written
        self.show_window()

    def _preset_editable(self, editable: bool) -> None:
        self.preset_bar.set_conversation(self.conv.preset, self.conv.system_prompt, editable)

    def _preset_changed(self, preset_id: str, prompt: str) -> None:
        if not self.conv.messages:
            self.conv.preset, self.conv.system_prompt = preset_id, prompt

    def _given_back(self) -> None:
        """A refused message is back in the text box (take_back.py)."""
        self._preset_editable(not self.conv.messages)
        self.focus_composer()
        self.refresh_list()

    def _unsaved(self, conv: Conversation) -> None:
        """A conversation left with no message was deleted again (take_back.py)."""
        self.refresh_list()
        if conv is self.conv:
            self.conversation_changed.emit("")
