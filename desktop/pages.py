"""The window's pages as the app builds them (part of the composition root): the chat page with
the voice and the conversation store, the Call page and its call factory, the Recordings page and
the recordings service; each one that cannot be built leaves a placeholder, never a broken window."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

from PySide6.QtWidgets import QWidget

from desktop.protocol.engine import EngineApi
from desktop.settings import Settings
from desktop.ui.main_window import MainWindow
from desktop.ui.placeholder import ComingSoonPage

log = logging.getLogger(__name__)


class Pages:
    """Builds and owns the pages and what they share (`store`, `voice`, `recordings`).
    Collaborators: `settings()` (read when needed; the chat page's voice toggle and conversation
    choice are written back into it, then `save()`), `engine` (the gateway proxy every page
    uses), `model()` and `sees_images()` (the model of the moment), `recording_status` (the
    recorder's messages, from its threads) and `open_settings(page)`."""

    def __init__(self, settings: Callable[[], Settings], engine: EngineApi, *, model: Callable[[], str | None],
                 sees_images: Callable[[], bool], recording_status: Callable[[str], None],
                 save: Callable[[], None], open_settings: Callable[[str], None], tools: Any = None) -> None:
        self._settings, self._engine, self._model, self._sees_images = settings, engine, model, sees_images
        self._recording_status, self._save, self._open_settings = recording_status, save, open_settings
        self._tools = tools  # desktop.tools.manager.ToolManager: the MCP servers the chat may use
        self.chat_page: QWidget | None = None
        self.store: Any = None  # desktop.chat.conversations.ConversationStore, built with the chat page
        self.voice: Any = None  # desktop.speech.voice.Voice, built with the chat page
        self.call_page: Any = None  # desktop.ui.call.page.CallPage
        self.recordings_page: QWidget | None = None  # desktop.ui.recordings.RecordingsPage
        self.recordings: Any = None  # desktop.recording.service.Recordings

    def build(self, window: MainWindow) -> None:
        """The recordings service, then each page, shown in `window`."""
        self.recordings = self._make_recordings()
        self.chat_page = self._make_chat_page()
        window.set_chat_page(self.chat_page)
        self.call_page = self._make_call_page()
        if self.call_page is not None:
            window.set_call_page(self.call_page)
        self.recordings_page = self._make_recordings_page()
        if self.recordings_page is not None:
            window.set_recordings_page(self.recordings_page)
            self.recordings_page.settings_page_requested.connect(self._open_settings)

    # ------------------------------------------------------------------ building

    def _make_chat_page(self) -> QWidget:
        try:
            from desktop.chat.conversations import ConversationStore
            from desktop.ui.chat.page import ChatPage

            from desktop.speech.voice import Voice

            self.store = self.store or ConversationStore.default()
            self.voice = Voice.create(self._settings())  # never raises: no sound device → audio off, said in the UI
            page = ChatPage(self._engine, self.store, self._settings, supports_images=self._sees_images(),
                            voice=self.voice, tools=self._tools)
        except Exception as exc:  # a broken chat page must not take the window down with it
            log.exception("The chat page could not be built")
            return ComingSoonPage("chat", "Chat is unavailable", f"The chat page could not be loaded: {exc}. "
                                  "The details are in the log file (Help → Open log folder).")
        if self.recordings is not None:
            page.reply_observers.append(self.recordings.chats.observe)
        page.conversation_changed.connect(self._conversation_changed)
        page.voice_toggled.connect(self._voice_toggled)
        page.tools_toggled.connect(self._tools_toggled)
        return page

    def _make_call_page(self) -> QWidget | None:
        try:
            from desktop.call.factory import CallFactory
            from desktop.call.state import CallMode
            from desktop.ui.call.page import CallPage

            calls = CallFactory(self._engine, lambda: self.voice, self._settings, recordings=self.recordings,
                                model=self._model, sees_images=self._sees_images, store=self.store,
                                presets=getattr(self.chat_page, "presets", None))  # the chat's: one list of presets
            page = CallPage(calls.start, calls.mic_status, cameras=calls,
                            camera_fps=self._settings().camera_preview_fps)
            calls.on_recording = page.recording.emit  # a Qt signal: safe from the recorder's threads
            calls.on_saved = lambda conv: self._call_saved(page, conv)
            page.set_mode(CallMode(self._settings().call_mode))
            return page
        except Exception:  # the placeholder stays: calls are unavailable, chat goes on
            log.exception("The call page could not be built")
            return None

    def _call_saved(self, page: Any, conv: Any) -> None:
        """A call that ended is a conversation now: the chat list shows it, the Call page says so."""
        refresh = getattr(self.chat_page, "refresh_list", None)
        if refresh is not None:
            refresh()
        page.saved.emit(conv.title)

    def _make_recordings_page(self) -> QWidget | None:
        try:
            from desktop.recording.paths import default_root
            from desktop.ui.recordings import RecordingsPage

            recordings = self.recordings
            root = recordings.root if recordings is not None else default_root()
            return RecordingsPage(lambda: root, self._speaker,
                                  live=recordings.live if recordings is not None else lambda: ())
        except Exception:  # the placeholder stays; the rest of the app goes on
            log.exception("The recordings page could not be built")
            return None

    def _speaker(self) -> Any:
        """The app's speaker for the recordings viewer (None when there is no sound output)."""
        voice = self.voice
        return voice.lend() if voice is not None and voice.available else None

    def _make_recordings(self) -> Any:
        """Recordings (calls, chats when on, replays, retention); None if they cannot work."""
        try:
            from desktop.recording.service import Recordings

            return Recordings(self._settings, status=self._recording_status, model=self._model,
                              voice=lambda: self.voice)
        except Exception:  # no recordings: the rest of the app goes on
            log.exception("Recordings are unavailable")
            return None

    # ------------------------------------------------------------------ settings

    def set_supports_images(self, images: bool) -> None:
        if hasattr(self.chat_page, "set_supports_images"):
            self.chat_page.set_supports_images(images)  # type: ignore[union-attr]

    def apply(self, old: Settings, new: Settings) -> None:
        """New settings that apply at once: the voice, and the Call page's mode."""
        self._apply_voice(old, new)
        self._apply_call_mode(old, new)

    def _tools_toggled(self, on: bool) -> None:
        self._settings().chat_tools = on
        self._save()

    def _voice_toggled(self, on: bool) -> None:
        self._settings().voice_enabled = on
        self._save()

    def _apply_voice(self, old: Settings, new: Settings) -> None:
        page = self.chat_page
        if self.voice is None or not hasattr(page, "set_voice"):
            return
        if new.audio_output_device != old.audio_output_device:
            from desktop.speech.voice import Voice

            self.voice.close()
            self.voice = Voice.create(new)
            page.set_voice(self.voice)
        else:
            self.voice.update(new)  # volume now; engine and voice from the next reply
        page.set_voice_enabled(new.voice_enabled)

    def _apply_call_mode(self, old: Settings, new: Settings) -> None:
        """A new "Start calls in" mode shows on the Call page at once, unless a call runs."""
        page = self.call_page
        if new.call_mode != old.call_mode and page is not None and getattr(page, "call", None) is None:
            from desktop.call.state import CallMode

            page.set_mode(CallMode(new.call_mode))

    def _conversation_changed(self, conv_id: str) -> None:
        self._settings().last_conversation_id = conv_id or None

    # ------------------------------------------------------------------ stopping

    async def stop_turns(self) -> None:
        """Hang up a call and detach the chat page from running replies (before the engine goes)."""
        if self.call_page is not None:
            try:
                await asyncio.wait_for(self.call_page.shutdown(), 5.0)
            except asyncio.TimeoutError:
                log.warning("The call did not end in time")
        if hasattr(self.chat_page, "shutdown"):  # stops a running reply before its worker goes away
            try:
                await asyncio.wait_for(self.chat_page.shutdown(), 3.0)  # type: ignore[union-attr]
            except asyncio.TimeoutError:
                log.warning("The chat page did not stop its reply in time")

    async def close(self) -> None:
        """The recordings' last lines (the chat sessions'; a call's closed when it ended), then the voice."""
        if self.recordings is not None:
            await asyncio.to_thread(self.recordings.close)
        if self.voice is not None:
            if hasattr(self.chat_page, "set_voice"):
                self.chat_page.set_voice(None)
            self.voice.close()
