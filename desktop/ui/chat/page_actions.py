"""The chat page's housekeeping (list, rename, delete, export, system prompt of a new conversation,
focus, the voice and image settings), kept apart from the turn logic in page.py. A mixin of ChatPage."""

from __future__ import annotations

from typing import TYPE_CHECKING

from desktop.chat import export as exporter
from desktop.chat.conversations import Conversation
from desktop.speech.voice import Voice
from desktop.ui.chat import dialogs

if TYPE_CHECKING:
    from desktop.ui.chat.page import ChatPage

    _Base = ChatPage
else:
    _Base = object


class PageActions(_Base):
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

    def set_voice_enabled(self, on: bool) -> None:
        """Follow settings.voice_enabled changed elsewhere (the settings dialog)."""
        self.speech.set_enabled(on)

    def toggle_voice(self) -> None:
        """What Ctrl+Shift+V does (the Voice button's own shortcut; for a menu action); with no
        sound output it says why the voice stays off."""
        if self.speech.button.isEnabled():
            self.speech.button.toggle()

    def voice_state(self) -> tuple[bool, bool]:
        """(whether the Voice toggle can be used now, whether the voice is on): the menu bar's item."""
        button = self.speech.button
        return button.isVisibleTo(self) and button.isEnabled(), button.isChecked()

    # The menu bar's conversation actions (and F2) act on the open conversation; one not saved yet
    # (no message) is not in the list: they say so instead of doing nothing.

    def rename_current(self) -> None:
        if self._saved_current("rename"):
            if self.conversations.model.row_of(self.conv.id) < 0:  # hidden by the search
                self.conversations.search.clear()
            self.conversations.start_rename(self.conv.id)

    def delete_current(self) -> None:
        if self._saved_current("delete"):
            self.delete(self.conv.id)

    def export_current(self) -> None:
        if self._saved_current("export"):
            self.export(self.conv.id)

    def _saved_current(self, verb: str) -> bool:
        if self.conv.id in self.store:
            return True
        self.status.emit(f"Nothing to {verb} yet: this conversation starts with its first message.")
        return False

    def refresh_list(self) -> None:
        """Re-read the list (filtered by the search box) with the current conversation selected."""
        query = self.conversations.search.text()
        convs = self.store.find(query) if query.strip() else self.store.list()
        self.conversations.set_conversations(convs, self.conv.id)

    def rename(self, conv_id: str, title: str) -> None:
        try:
            self.store.rename(conv_id, title)
        except (KeyError, ValueError) as exc:
            self.status.emit(str(exc).strip("'\""))
            return
        self.refresh_list()
        self.status.emit(f"Renamed to “{title}”")

    def delete(self, conv_id: str, *, confirmed: bool = False) -> None:
        """Delete a conversation after asking; in place of the open one the next in the list opens
        (the previous one after the last; a new conversation when none is left). A reply being
        written to it is cancelled first."""
        conv = self.store.get(conv_id)
        if conv is None:
            return
        if not confirmed:
            dialogs.confirm_delete(self, conv.title, lambda: self.delete(conv_id, confirmed=True))
            return
        if conv is self.conv:
            neighbour = self.conversations.neighbour_of(conv_id)
            if not (neighbour and self.open_conversation(neighbour)):
                self.new_conversation()
        if self.turns.of(conv_id) is not None:
            self.tasks.spawn(self._delete_after_reply(conv))
            return
        self.store.delete(conv_id)
        self.refresh_list()
        self.status.emit(f"Deleted “{conv.title}”")

    async def _delete_after_reply(self, conv: Conversation) -> None:
        await self.turns.forget(conv.id)
        self.store.delete(conv.id)
        self.refresh_list()
        self.status.emit(f"Deleted “{conv.title}” (its reply was cancelled)")

    def export(self, conv_id: str, path: str | None = None) -> None:
        """Export as Markdown or JSON (by the file's suffix); asks where unless `path` is given."""
        conv = self.store.get(conv_id)
        if conv is None:
            return
        path = path or dialogs.ask_export_path(self, conv.title)
        if not path:
            return
        try:
            written = exporter.export(conv, path)
        except OSError as exc:
            self.status.emit(f"Could not export: {exc.strerror or exc}")
            return
        self.status.emit(f"Exported “{conv.title}” to {written}")

    def edit(self, index: int) -> None:
        """Put a user message into the composer; sending it branches the conversation there."""
        if self.busy or not 0 <= index < len(self.conv.messages):
            return
        self._edit_index = index
        self.composer.start_edit(self.conv.messages[index].content)

    # ------------------------------------------------------------------ internals

    def _leave(self) -> None:
        """Before showing another conversation: silence the voice (only the shown conversation's
        reply is spoken; a reply written meanwhile goes on unheard) and drop an unfinished edit."""
        self.speech.silence()
        self._cancel_edit()
        self.composer.end_edit()

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

    def _preset_editable(self, editable: bool) -> None:
        self.preset_bar.set_conversation(self.conv.preset, self.conv.system_prompt, editable)

    def _preset_changed(self, preset_id: str, prompt: str) -> None:
        if not self.conv.messages:
            self.conv.preset, self.conv.system_prompt = preset_id, prompt

    def _cancel_edit(self) -> None:
        if self._edit_index is not None:
            self._edit_index = None
            self.composer.cancel_edit()
