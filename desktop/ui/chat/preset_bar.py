"""The system prompt of the conversation, above its messages: pick a preset, edit its text and its
voice, save it as a preset of one's own. Only a new conversation can change it; later it is shown
only. The voice and rate of one's own preset are saved as they change."""

from __future__ import annotations

from html import escape

from typing import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from desktop.chat.presets import Preset, PresetStore
from desktop.ui.style import muted, small_font
from desktop.ui.plain import plain_tip
from desktop.ui.chat.preset_voice import PresetVoice


class PresetBar(QWidget):
    changed = Signal(str, str)  # preset id ("" once the text was edited), prompt text
    status = Signal(str)

    def __init__(self, presets: PresetStore, parent: QWidget | None = None,
                 settings_voice: Callable[[], str] = lambda: "") -> None:  # fmt: skip
        super().__init__(parent)
        self.presets, self._quiet = presets, False
        outer = QVBoxLayout(self)
        outer.setContentsMargins(16, 8, 16, 4)
        outer.setSpacing(4)
        row = QHBoxLayout()
        label = QLabel("System prompt")
        label.setStyleSheet(f"color: {muted(self).name()};")
        row.addWidget(label)
        self.combo = QComboBox()
        self.combo.setMinimumContentsLength(14)
        self.combo.activated.connect(self._picked)
        row.addWidget(self.combo)
        self.fixed = QLabel()  # the preset of a conversation that has started (no longer a choice)
        row.addWidget(self.fixed)
        self.toggle = QToolButton()
        self.toggle.setCheckable(True)
        self.toggle.setAutoRaise(True)
        self.toggle.toggled.connect(self._show_editor)
        row.addWidget(self.toggle)
        self.state = QLabel()
        self.state.setFont(small_font(self))
        self.state.setStyleSheet(f"color: {muted(self).name()};")
        row.addWidget(self.state)
        row.addStretch(1)
        outer.addLayout(row)

        self.editor = QPlainTextEdit()
        self.editor.setFixedHeight(84)
        self.editor.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.editor.setPlaceholderText("No system prompt: the model gets only the conversation")
        self.editor.textChanged.connect(self._edited)
        outer.addWidget(self.editor)
        self.speech = PresetVoice(settings_voice)  # the preset's voice and speaking rate
        self.speech.changed.connect(self._speech_changed)
        outer.addWidget(self.speech)
        save_row = QHBoxLayout()
        self.name = QLineEdit()
        self.name.setPlaceholderText("Name for a new preset")
        save_row.addWidget(self.name, 1)
        self.save_button = QPushButton("Save as preset")
        self.save_button.clicked.connect(self._save_as)
        save_row.addWidget(self.save_button)
        self.delete_button = QPushButton("Delete preset")
        self.delete_button.clicked.connect(self._delete)
        save_row.addWidget(self.delete_button)
        self.save_row = QWidget()
        self.save_row.setLayout(save_row)
        save_row.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(self.save_row)
        self._editable = True
        self._fill()
        self._show_editor(False)

    def set_conversation(self, preset_id: str, prompt: str, editable: bool) -> None:
        """Show a conversation's system prompt; `editable` for a conversation with no messages."""
        self._quiet, self._editable = True, editable
        try:
            i = self.combo.findData(preset_id)
            self.combo.setCurrentIndex(i)
            self.editor.setPlainText(prompt)
            self._show_speech(self.presets.get(preset_id))
        finally:
            self._quiet = False
        self.combo.setVisible(editable)
        preset = self.presets.get(preset_id)
        self.fixed.setText(f"<b>{escape(preset.name)}</b>" if preset else "<i>custom</i>" if prompt else "<i>none</i>")
        self.fixed.setToolTip(plain_tip(prompt))
        self.fixed.setVisible(not editable)
        self.editor.setReadOnly(not editable)
        self.speech.setEnabled(editable)
        self._update_state(preset_id, prompt)
        self._show_editor(self.toggle.isChecked())

    def _fill(self) -> None:
        current = self.combo.currentData()
        self.combo.clear()
        for p in self.presets.list():
            self.combo.addItem(p.name + ("" if p.builtin else "  (mine)"), p.id)
            self.combo.setItemData(self.combo.count() - 1, plain_tip(p.prompt), 3)  # ToolTipRole
        self.combo.setCurrentIndex(max(self.combo.findData(current), 0))

    def _picked(self, index: int) -> None:
        preset = self.presets.get(self.combo.itemData(index))
        if preset is not None:
            self._quiet = True
            self.editor.setPlainText(preset.prompt)
            self._show_speech(preset)
            self._quiet = False
            self._update_state(preset.id, preset.prompt)
            self.changed.emit(preset.id, preset.prompt)

    def _edited(self) -> None:
        if self._quiet or not self._editable:
            return
        preset = self.presets.get(self.combo.currentData())
        text = self.editor.toPlainText()
        pid = preset.id if preset is not None and preset.prompt == text else ""
        self._update_state(pid, text)
        self.changed.emit(pid, text)

    def _update_state(self, preset_id: str, prompt: str) -> None:
        preset = self.presets.get(preset_id)
        state = "" if preset is not None else "edited" if prompt else "none"
        self.state.setText(state if self._editable else "")
        self.delete_button.setVisible(preset is not None and not preset.builtin and self._editable)

    def _show_editor(self, shown: bool) -> None:
        self.toggle.setText(("Hide" if shown else "Edit" if self._editable else "Show") + " prompt")
        self.editor.setVisible(shown)
        self.speech.setVisible(shown)
        self.save_row.setVisible(shown and self._editable)

    def _show_speech(self, preset: Preset | None) -> None:
        self.speech.set_value(preset.voice, preset.rate) if preset is not None else self.speech.set_value(None, 1.0)

    def _speech_changed(self) -> None:
        """One's own preset keeps its new voice or rate at once; a built-in's go with Save as preset."""
        preset = self.presets.get(self.combo.currentData())
        if not self._editable or preset is None or preset.builtin:
            return
        voice, rate = self.speech.value()
        if (voice, rate) != (preset.voice, preset.rate):
            self.presets.update(preset.id, voice=voice, rate=rate)
            self.status.emit(f"Saved the voice of the preset “{preset.name}”")

    def _save_as(self) -> None:
        try:
            voice, rate = self.speech.value()
            preset = self.presets.add(self.name.text(), self.editor.toPlainText(), voice=voice, rate=rate)
        except ValueError as exc:
            self.status.emit(str(exc))
            return
        self.name.clear()
        self._fill()
        self.combo.setCurrentIndex(self.combo.findData(preset.id))
        self._update_state(preset.id, preset.prompt)
        self.changed.emit(preset.id, preset.prompt)
        self.status.emit(f"Saved the preset “{preset.name}”")

    def _delete(self) -> None:
        preset = self.presets.get(self.combo.currentData())
        if preset is None or preset.builtin:
            return
        self.presets.delete(preset.id)
        self._fill()
        self._picked(self.combo.currentIndex())
        self.status.emit(f"Deleted the preset “{preset.name}”")
