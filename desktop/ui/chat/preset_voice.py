"""The voice of a preset, in the preset editor: which voice speaks its replies (in the chat with
Voice on, and in calls) and at what rate. "As in Settings" keeps the voice chosen in Settings."""

from __future__ import annotations

from typing import Callable

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QDoubleSpinBox, QHBoxLayout, QLabel, QWidget

from desktop.chat.presets import RATES
from desktop.model.tts import list_voices
from desktop.settings import Settings
from desktop.ui.style import muted

ENGINE_NAMES = {"piper": "Piper", "espeak": "espeak"}


def settings_voice(settings: Settings) -> str:
    """The Settings' voice in words: "Piper · default", "espeak · en-us"."""
    return f"{ENGINE_NAMES.get(settings.tts_engine, settings.tts_engine)} · {settings.tts_voice or 'default'}"


class PresetVoice(QWidget):
    """`value()` → (voice, rate) as a Preset holds them ("engine:voice" or None, a multiple of the
    voice's pace); `set_value` shows a preset's; `changed` when the user picks another.
    `settings_voice()`: the Settings' voice in words, for the first choice's label."""

    changed = Signal()

    def __init__(self, settings_voice: Callable[[], str] = lambda: "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.settings_voice = settings_voice
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        label = QLabel("Voice")
        label.setStyleSheet(f"color: {muted(self).name()};")
        row.addWidget(label)
        self.voice = QComboBox()
        self.voice.setMinimumContentsLength(20)
        self.voice.setMaxVisibleItems(16)
        self.voice.setAccessibleName("Voice of this preset")
        self.voice.setToolTip("Speaks this preset's replies: in the chat with Voice on, and in calls")
        row.addWidget(self.voice)
        rate_label = QLabel("Rate")
        rate_label.setStyleSheet(f"color: {muted(self).name()};")
        row.addWidget(rate_label)
        self.rate = QDoubleSpinBox()
        self.rate.setRange(*RATES)
        self.rate.setSingleStep(0.1)
        self.rate.setDecimals(2)
        self.rate.setSuffix(" ×")
        self.rate.setValue(1.0)
        self.rate.setAccessibleName("Speaking rate of this preset")
        self.rate.setToolTip("How fast the voice speaks: 1 × is its own pace")
        row.addWidget(self.rate)
        row.addStretch(1)
        self._fill()
        self.voice.activated.connect(lambda _i: self.changed.emit())
        self.rate.editingFinished.connect(self.changed)

    def _fill(self) -> None:
        described = self.settings_voice()
        self.voice.addItem("As in Settings" + (f" ({described})" if described else ""), None)
        for engine, names in list_voices().items():
            for name in names:
                self.voice.addItem(f"{ENGINE_NAMES.get(engine, engine)} · {name}", f"{engine}:{name}")

    def value(self) -> tuple[str | None, float]:
        return self.voice.currentData(), round(self.rate.value(), 2)

    def set_value(self, voice: str | None, rate: float) -> None:
        """Show a preset's voice and rate (a voice no longer installed stays listed, marked)."""
        i = self.voice.findData(voice)
        if i < 0 and voice is not None:
            self.voice.addItem(f"{voice} (not installed)", voice)
            i = self.voice.count() - 1
        self.voice.setCurrentIndex(max(i, 0))
        self.rate.setValue(rate)
