"""Issue 19, new-user item 3 in Settings → Audio: the microphones and speakers by their real names
(Pulse's sources and sinks), a speaker test tone and a microphone level meter that go through the
device interfaces (fake devices on a virtual clock here), and a device that will not open says why."""

from __future__ import annotations

import numpy as np
import pytest

from desktop.media.clock import VirtualClock
from desktop.media.device_check import MicLevel, ToneTest
from desktop.media.device_list import DeviceChoice, SoundDevices
from desktop.media.fake_audio import FakeAudioOutput
from desktop.media.fake_mic import FakeMicrophone
from desktop.media.mic import MicUnavailable
from desktop.settings import Settings
from desktop.ui.settings_audio import AudioPage
from desktop.ui.settings_dialog import SettingsDialog

pytestmark = pytest.mark.hardening

DEVICES = SoundDevices(
    inputs=(DeviceChoice("pulse:alsa_input.pci-0000_00_1f.3.analog-stereo", "Built-in Audio Analog Stereo"),
            DeviceChoice("pulse:alsa_input.usb-Logitech_H390-00.mono-fallback", "H390 Headset Mono", True)),
    outputs=(DeviceChoice("pulse:alsa_output.pci-0000_00_1f.3.analog-stereo", "Built-in Audio Analog Stereo", True),
             DeviceChoice("pulse:bluez_sink.AC_80_0A.a2dp_sink", "WH-1000XM4")))


class Devices:
    """Fake speakers and microphones on one virtual clock, as the page opens them."""

    def __init__(self) -> None:
        self.clock = VirtualClock()
        self.speakers: list[tuple[str | None, FakeAudioOutput]] = []
        self.mics: list[tuple[str | None, FakeMicrophone]] = []
        self.refuse = False

    def speaker(self, device):
        out = FakeAudioOutput(self.clock, device_rate=48000, pre_roll_ms=40)
        self.speakers.append((device, out))
        return out

    def mic(self, device):
        if self.refuse:
            raise MicUnavailable("The microphone 'H390 Headset Mono' could not be opened — voice input is off")
        m = FakeMicrophone(self.clock, device_rate=48000)
        self.mics.append((device, m))
        return m

    def run(self, seconds: float) -> None:
        for _ in range(int(seconds / 0.02)):
            self.clock.advance(0.02)
            for _, out in self.speakers:
                out.pump()
            for _, m in self.mics:
                m.pump()


@pytest.fixture
def make(qtbot):
    def make(settings: Settings, fakes: Devices) -> tuple[SettingsDialog, AudioPage]:
        dlg = SettingsDialog(settings, sound_devices=DEVICES)
        audio = AudioPage(settings, DEVICES, {"espeak": ["en-us"], "piper": []},
                          tone=ToneTest(fakes.speaker, seconds=0.4), mic_level=MicLevel(fakes.mic))
        index = dlg.pages.index(next(p for p in dlg.pages if p.title == "Audio"))
        dlg.tabs.removeTab(index)
        dlg.pages[index] = audio
        dlg.tabs.insertTab(index, audio, audio.title)
        audio.changed.connect(dlg._changed)
        qtbot.addWidget(dlg)
        dlg.open()
        qtbot.waitExposed(dlg)
        dlg.tabs.setCurrentWidget(audio)
        return dlg, audio

    return make


def items(combo) -> list[str]:
    return [combo.itemText(i) for i in range(combo.count())]


def test_real_device_names_a_test_tone_and_a_level_meter(make, qtbot, screenshot):
    fakes = Devices()
    s = Settings(audio_input_device="pulse:alsa_input.usb-Logitech_H390-00.mono-fallback")
    dlg, audio = make(s, fakes)
    assert items(audio.input) == ["System default", "Built-in Audio Analog Stereo", "H390 Headset Mono"]
    assert items(audio.output) == ["System default", "Built-in Audio Analog Stereo", "WH-1000XM4"]
    assert audio.input.currentText() == "H390 Headset Mono"
    audio.output.setCurrentIndex(2)
    assert audio.values()["audio_output_device"] == "pulse:bluez_sink.AC_80_0A.a2dp_sink"
    # the speaker test: a tone through the chosen speaker, then it is closed
    audio.tone.click()
    assert fakes.speakers[0][0] == "pulse:bluez_sink.AC_80_0A.a2dp_sink" and audio.tone.text() == "Playing…"
    fakes.run(0.2)
    # the microphone check: its level moves with what it hears
    audio.mic_check.button.click()
    device, m = fakes.mics[0]
    assert device == "pulse:alsa_input.usb-Logitech_H390-00.mono-fallback"
    t = np.arange(24000) / 48000
    m.play((0.3 * np.sin(2 * np.pi * 300 * t)).astype(np.float32), 48000, at=fakes.clock.now())
    fakes.run(0.2)
    audio.mic_check.poll()
    assert audio.mic_check.meter.value > 50
    screenshot(dlg, "settings_audio_devices")
    fakes.run(0.4)
    qtbot.waitUntil(lambda: audio.tone.text() == "&Test", timeout=3000)
    assert fakes.speakers[0][1]._closed and np.abs(fakes.speakers[0][1].played()).max() > 0.1
    dlg.tabs.setCurrentIndex(0)  # leaving the page stops the microphone
    assert m._closed and not audio.mic_check.button.isChecked()


def test_a_microphone_that_will_not_open_says_why(make, screenshot):
    fakes = Devices()
    fakes.refuse = True
    dlg, audio = make(Settings(), fakes)
    audio.mic_check.button.click()
    assert not audio.mic_check.button.isChecked()
    assert audio.input_problem.isVisible() and "could not be opened" in audio.input_problem.text()
    screenshot(dlg, "settings_audio_mic_refused")


def test_a_saved_pulse_device_not_plugged_in_keeps_its_name(make):
    fakes = Devices()
    dlg, audio = make(Settings(audio_output_device="pulse:bluez_sink.00_11.a2dp_sink"),
                      fakes)
    assert audio.output.currentText() == "bluez_sink.00_11.a2dp_sink (not connected)"
    assert audio.values()["audio_output_device"] == "pulse:bluez_sink.00_11.a2dp_sink"
