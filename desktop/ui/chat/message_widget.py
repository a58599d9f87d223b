"""One message in the chat view: who wrote it, its text (the assistant's as Markdown), the
badge of a reply, and its actions — Copy on every message, Edit on the user's, Regenerate on
the last reply, "‹ 2/3 ›" to go through the kept versions of the last reply and the branches of
an edited message, Replay on a spoken reply (with a note when it could not be spoken). Before a
reply's first words it says what is happening (reading a long prompt: how far, with a bar); an
interrupted reply says so, and the last one offers Retry and Continue; a reply cut by a limit says
which (the last one cut by the reply length limit offers Continue)."""

from __future__ import annotations

from enum import Enum
from typing import Any, Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QFrame, QHBoxLayout, QLabel, QProgressBar, QPushButton, QToolButton, QVBoxLayout, QWidget,
)

from desktop.chat.reply_limit import limit_of
from desktop.chat.tool_rounds import prose
from desktop.ui.chat.badge import Badge
from desktop.ui.chat.limit_row import LimitRow
from desktop.ui.chat.markdown_view import MarkdownView
from desktop.ui.chat.thumbnails import ThumbnailStrip, names_of
from desktop.ui.chat.tool_card import ToolCard
from desktop.ui.style import accent, base, blend, muted, small_font

ROLE_NAMES = {"user": "You", "assistant": "Assistant", "tool": "Tool call"}


def shown(role: str, text: str) -> str:
    """What a message shows: a reply without the tool calls it made (those show as cards)."""
    return prose(text) if role == "assistant" else text
THINKING = "Thinking…"
INTERRUPTED_NOTE = "This reply was interrupted before it was finished."


class VoiceState(Enum):
    NONE = "none"  # not spoken (or its audio is no longer kept): no button
    SPEAKING = "speaking"  # being spoken as it streams: the button stops it
    READY = "ready"  # its audio is kept: Replay plays it again
    PLAYING = "playing"  # being replayed: the button stops it


class MessageWidget(QFrame):
    """Actions emit the message's index in its conversation."""

    edit_requested = Signal(int)
    regenerate_requested = Signal(int)
    replay_requested = Signal(int)
    continue_requested = Signal(int)
    version_requested = Signal(int, int)  # the message's index, the version to show (0-based)
    copied = Signal()

    def __init__(self, role: str, text: str, index: int, stats: dict[str, Any] | None = None,
                 parent: QWidget | None = None, *, interrupted: bool = False, images: Sequence[str] = ()) -> None:
        super().__init__(parent)
        self.role, self.index, self.interrupted = role, index, interrupted
        self._last = False  # the last message of its conversation (see set_can_regenerate)
        self._streaming = False
        self._enabled = True  # actions that wait while a reply is written (set_actions_enabled)
        self._version, self._versions = 0, 1  # the version (a user message's: branch) shown, 0-based, of how many
        self.request_id: str | None = (stats or {}).get("request_id")  # ties it to its spoken audio
        self.voice_state = VoiceState.NONE
        self.setObjectName("message")
        if role == "user":
            self.setStyleSheet(f"QFrame#message {{ background: {accent(self).name()}; border-radius: 10px; }}")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 8, 12, 8)
        layout.setSpacing(2)

        header = QHBoxLayout()
        header.setSpacing(2)
        who = QLabel(ROLE_NAMES.get(role, role.title()))
        font = small_font(who, 0)
        font.setBold(True)
        who.setFont(font)
        header.addWidget(who)
        header.addStretch(1)
        thing = "branch" if role == "user" else "version"  # an edited message's, a regenerated reply's
        self.previous_version = self._action("‹", f"Previous {thing}", lambda: self._go(-1))
        self.version_label = QLabel()
        self.version_label.setFont(small_font(self))
        self.version_label.setStyleSheet(f"color: {muted(self).name()};")
        self.next_version = self._action("›", f"Next {thing}", lambda: self._go(1))
        for widget in (self.previous_version, self.version_label, self.next_version):
            header.addWidget(widget)
            widget.hide()
        for arrow in (self.previous_version, self.next_version):
            arrow.setFont(small_font(self, 2))  # "‹" at the small size is too small a target
        self.copy_button = self._action("Copy", "Copy this message as text", self._copy)
        self.edit_button = self._action("Edit", "Edit this message: sending it starts a new branch here; "
                                        "‹ › on the message goes back to this one", lambda: self.edit_requested.emit(self.index))
        self.regenerate_button = self._action("Regenerate", "Write this reply again",
                                              lambda: self.regenerate_requested.emit(self.index))
        self.replay_button = self._action("Replay", "", lambda: self.replay_requested.emit(self.index))
        for button in (self.replay_button, self.copy_button, self.edit_button, self.regenerate_button):
            header.addWidget(button)
        self.edit_button.setVisible(role == "user")
        self.regenerate_button.hide()
        self.replay_button.hide()
        layout.addLayout(header)

        self.thumbnails = ThumbnailStrip()
        self.thumbnails.set_images(names_of(list(images)))
        layout.addWidget(self.thumbnails)
        self.card: ToolCard | None = None  # a tool message's call (set up by the view)
        if role == "tool":
            self.card = ToolCard()
            layout.addWidget(self.card)
            text = ""
        self.body = MarkdownView(markdown=role == "assistant")
        self.body.set_text(shown(role, text))
        self.body.setVisible(bool(shown(role, text)))  # a reply before its first words: no empty block
        layout.addWidget(self.body)
        self.badge = Badge()
        self.badge.set_stats(stats)
        layout.addWidget(self.badge)
        self._waiting = QLabel(THINKING)
        self._waiting.setStyleSheet(f"color: {muted(self).name()}; font-style: italic;")
        self._waiting.setTextFormat(Qt.TextFormat.PlainText)
        self._waiting.hide()
        layout.addWidget(self._waiting)
        self.progress: QProgressBar | None = None  # how far a long prompt has been read (made when needed)
        self._interrupted_row: QWidget | None = None  # the note, Retry and Continue (made when needed)
        self.limit_row = LimitRow()  # which limit cut the reply, Continue (shown when one did)
        self.limit_row.continue_requested.connect(lambda: self.continue_requested.emit(self.index))
        layout.addWidget(self.limit_row)
        self.limit_row.set_limit(limit_of(stats) if role == "assistant" else None)
        self._layout = layout
        if interrupted:
            self.set_interrupted(True)
        self.voice_note = QLabel()
        self.voice_note.setFont(small_font(self))
        self.voice_note.setStyleSheet(f"color: {muted(self).name()};")
        self.voice_note.setWordWrap(True)
        self.voice_note.setTextFormat(Qt.TextFormat.PlainText)
        self.voice_note.hide()
        layout.addWidget(self.voice_note)

    def _interrupted_actions(self) -> QWidget:
        row = QWidget()
        self._layout.insertWidget(self._layout.indexOf(self._waiting) + 1, row)
        line = QHBoxLayout(row)
        line.setContentsMargins(0, 6, 0, 0)
        line.setSpacing(8)
        note = QLabel(INTERRUPTED_NOTE)
        note.setFont(small_font(self))
        note.setStyleSheet(f"color: {muted(self).name()}; font-style: italic;")
        line.addWidget(note)
        self.retry_button = QPushButton("Retry")
        self.retry_button.setToolTip("Write this reply again from the start")
        self.retry_button.clicked.connect(lambda: self.regenerate_requested.emit(self.index))
        self.continue_button = QPushButton("Continue")
        self.continue_button.setToolTip("Go on writing this reply from where it stopped")
        self.continue_button.clicked.connect(lambda: self.continue_requested.emit(self.index))
        line.addWidget(self.retry_button)
        line.addWidget(self.continue_button)
        line.addStretch(1)
        return row

    def _action(self, text: str, tip: str, slot) -> QToolButton:
        button = QToolButton(self)
        button.setText(text)
        button.setToolTip(tip)
        button.setAccessibleName(tip if len(text) == 1 else text)  # the arrows are named by their tips
        button.setAutoRaise(True)
        button.setFont(small_font(self))
        button.setCursor(Qt.CursorShape.PointingHandCursor)
        button.setStyleSheet(f"QToolButton {{ color: {muted(self).name()}; padding: 1px 6px; }}"
                             f"QToolButton:disabled {{ color: {blend(muted(self), base(), 0.6).name()}; }}")
        button.clicked.connect(slot)
        return button

    def text(self) -> str:
        return self.card.plain() if self.card is not None else self.body.text()

    def set_text(self, text: str) -> None:
        text = shown(self.role, text)
        self.body.set_text(text)
        self.body.setVisible(bool(text))
        self._waiting.setVisible(not text)
        if text and self.progress is not None:
            self.progress.hide()

    def set_waiting(self, text: str, fraction: float | None = None) -> None:
        """What a streaming reply shows before its first words ("Reading your message… 1,234 /
        7,000 tokens"), with a bar when `fraction` (0–1) is known."""
        self._waiting.setText(text or THINKING)
        self._waiting.setVisible(not self.text())
        if fraction is not None and self.progress is None:
            self.progress = QProgressBar()
            self.progress.setTextVisible(False)
            self.progress.setFixedHeight(4)
            self.progress.setMaximumWidth(320)
            self.progress.setRange(0, 1000)
            self._layout.insertWidget(self._layout.indexOf(self._waiting) + 1, self.progress)
        if self.progress is not None:
            self.progress.setVisible(fraction is not None and not self.text())
            self.progress.setValue(round(1000 * min(max(fraction or 0.0, 0.0), 1.0)))

    def set_stats(self, stats: dict[str, Any] | None) -> None:
        self.badge.set_stats(stats)
        self.limit_row.set_limit(limit_of(stats) if self.role == "assistant" else None)
        self._sync_versions()
        self.request_id = (stats or {}).get("request_id", self.request_id)

    def set_versions(self, shown: int, total: int) -> None:
        """The reply has `total` kept versions, `shown` (0-based) the one shown: "‹ 2/3 ›" on the
        last reply when there is more than one. A user message: its branches (each edit made one),
        on any user message."""
        self._version, self._versions = shown, max(total, 1)
        self.version_label.setText(f"{shown + 1}/{self._versions}")
        if self.role == "user":
            self.version_label.setAccessibleName(f"Branch {shown + 1} of {self._versions}")
            self.version_label.setToolTip(f"Branch {shown + 1} of {self._versions}: each edit of this message "
                                          "starts a branch with its own replies")
        else:
            self.version_label.setAccessibleName(f"Version {shown + 1} of {self._versions}")
            self.version_label.setToolTip(f"Version {shown + 1} of {self._versions} of this reply")
        self._sync_versions()

    def _sync_versions(self) -> None:
        show = (self.role == "user" or self._last and self.role == "assistant") and self._versions > 1
        for widget in (self.previous_version, self.version_label, self.next_version):
            widget.setVisible(show)
        can = self._enabled and not self._streaming  # while a reply streams the switcher waits
        self.previous_version.setEnabled(can and self._version > 0)
        self.next_version.setEnabled(can and self._version < self._versions - 1)
        self.limit_row.set_last(self._last and not self._streaming, can and not self.interrupted)

    def _go(self, step: int) -> None:
        to = self._version + step
        if 0 <= to < self._versions:
            self.version_requested.emit(self.index, to)

    def set_voice_state(self, state: VoiceState) -> None:
        """Show Replay as the reply's voice allows (see VoiceState)."""
        self.voice_state = state
        button = self.replay_button
        button.setVisible(state is not VoiceState.NONE)
        button.setText("Replay" if state is VoiceState.READY else "Stop")
        button.setToolTip("Play this reply's voice again" if state is VoiceState.READY else
                          "Stop speaking this reply (Esc)")

    def set_voice_note(self, text: str) -> None:
        """A quiet line under the reply, e.g. why it could not be spoken ("" hides it)."""
        self.voice_note.setText(text)
        self.voice_note.setVisible(bool(text))

    def set_streaming(self, streaming: bool) -> None:
        """While a reply streams it has no actions; before its first words it says so."""
        self._streaming = streaming
        self.copy_button.setVisible(not streaming)
        self.set_can_regenerate(self._last)
        self._waiting.setVisible(streaming and not self.text())
        if streaming and self._interrupted_row is not None:
            self._interrupted_row.hide()
        if streaming:
            self.limit_row.set_limit(None)  # a continuation: the new end tells
        if not streaming:
            if self.progress is not None:
                self.progress.hide()
            self.body.flush()

    def set_can_regenerate(self, can: bool) -> None:
        """The last reply can be written again (an interrupted one: Retry, or Continue)."""
        self._last = can
        whole = not (self.interrupted or self._streaming)
        self.regenerate_button.setVisible(can and self.role == "assistant" and whole)
        self._sync_versions()
        if self._interrupted_row is not None:
            self.retry_button.setVisible(can)
            self.continue_button.setVisible(can)

    def set_interrupted(self, interrupted: bool) -> None:
        """Mark the reply as interrupted (or whole again, after Continue finished it)."""
        self.interrupted = interrupted
        if interrupted and self._interrupted_row is None:
            self._interrupted_row = self._interrupted_actions()
        if self._interrupted_row is not None:
            self._interrupted_row.setVisible(interrupted)
            self.set_actions_enabled(self.edit_button.isEnabled())
        self.set_can_regenerate(self._last)

    def set_actions_enabled(self, enabled: bool) -> None:
        """Edit, Regenerate and the version switcher wait while a reply is being written."""
        self._enabled = enabled
        self._sync_versions()
        self.edit_button.setEnabled(enabled)
        self.regenerate_button.setEnabled(enabled)
        if self._interrupted_row is not None:
            self.retry_button.setEnabled(enabled)
            self.continue_button.setEnabled(enabled)

    def _copy(self) -> None:
        QGuiApplication.clipboard().setText(self.text())
        self.copied.emit()
