"""Issue 19, new-user item 3 (microphones and speakers): devices are looked for again for real
(PortAudio re-scanned while no stream is open), PulseAudio/PipeWire sources and sinks are listed
by their own names (pactl's JSON, parsed defensively) and opened through PortAudio's "pulse"
device with PULSE_SOURCE/PULSE_SINK set; the test tone and the level meter go through the device
interfaces, here the fakes on a virtual clock."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import numpy as np
import pytest

from desktop.media import devices, mic
from desktop.media.clock import VirtualClock
from desktop.media.device_check import MicLevel, ToneTest
from desktop.media.device_list import list_sound_devices
from desktop.media.devices import AudioDevice
from desktop.media.fake_audio import FakeAudioOutput
from desktop.media.fake_mic import FakeMicrophone
from desktop.media.frames import SILENCE_DB
from desktop.media.pulse import pulse_devices

pytestmark = pytest.mark.hardening

SOURCES = [
    {"index": 1, "name": "alsa_output.pci-0000_00_1f.3.analog-stereo.monitor", "description": "Monitor of Built-in Audio",
     "monitor_of_sink": "alsa_output.pci-0000_00_1f.3.analog-stereo", "properties": {"device.class": "monitor"}},
    {"index": 2, "name": "alsa_input.pci-0000_00_1f.3.analog-stereo", "description": "Built-in Audio Analog Stereo",
     "monitor_of_sink": "n/a", "properties": {"device.class": "sound"}},
    {"index": 3, "name": "alsa_input.usb-Logitech_H390-00.mono-fallback", "description": "H390 Headset  Mono",
     "monitor_of_sink": None},
    {"index": 4, "description": "no name: skipped"},
    "junk",
]
SINKS = [{"index": 1, "name": "alsa_output.pci-0000_00_1f.3.analog-stereo", "description": "Built-in Audio Analog Stereo"}]
INFO = {"default_source_name": "alsa_input.usb-Logitech_H390-00.mono-fallback",
        "default_sink_name": "alsa_output.pci-0000_00_1f.3.analog-stereo"}


def pactl(answers: dict[str, object]):
    def run(args: list[str]) -> str | None:
        value = answers.get(" ".join(args[2:]))
        return value if value is None or isinstance(value, str) else json.dumps(value)
    return run


def port(index: int, name: str, inputs: int = 2, outputs: int = 2, default: bool = False) -> AudioDevice:
    return AudioDevice(index, name, "ALSA", max(inputs, outputs), 44100.0, default)


PORTAUDIO_WITH_PULSE = [port(0, "pulse"), port(1, "default", default=True)]


def test_pulse_sources_by_their_own_names_without_monitors():
    found = pulse_devices("sources", pactl({"list sources": SOURCES, "info": INFO}))
    assert [d.description for d in found] == ["Built-in Audio Analog Stereo", "H390 Headset Mono"]
    assert [d.is_default for d in found] == [False, True]
    assert found[1].key == "pulse:alsa_input.usb-Logitech_H390-00.mono-fallback"


@pytest.mark.parametrize("answer", [None, "Source #1\n\tState: RUNNING", json.dumps({"not": "a list"})])
def test_no_pulse_server_or_an_old_pactl_gives_none(answer):
    assert pulse_devices("sources", lambda args: answer) is None


def test_settings_list_real_names_where_pulse_answers_else_portaudio_names():
    with_pulse = list_sound_devices(inputs=lambda: (PORTAUDIO_WITH_PULSE, None),
                                    outputs=lambda: (PORTAUDIO_WITH_PULSE, None),
                                    pulse=lambda kind: pulse_devices(kind, pactl({"list sources": SOURCES,
                                                                                  "list sinks": SINKS, "info": INFO})),
                                    scan=lambda: True)
    assert [c.label for c in with_pulse.inputs] == ["Built-in Audio Analog Stereo", "H390 Headset Mono"]
    assert [c.label for c in with_pulse.outputs] == ["Built-in Audio Analog Stereo"]
    assert all(c.key.startswith("pulse:") for c in (*with_pulse.inputs, *with_pulse.outputs))
    alsa = [port(0, "HDA Intel PCH: ALC3246 Analog (hw:0,0)", default=True), port(1, "USB Audio: H390 (hw:1,0)", 1, 0)]
    plain = list_sound_devices(inputs=lambda: (alsa, None), outputs=lambda: (alsa[:1], None),
                               pulse=lambda kind: None, scan=lambda: True)
    assert [c.label for c in plain.inputs] == [d.name for d in alsa]
    assert plain.inputs[0].key == alsa[0].name and plain.inputs[0].is_default


def test_a_pulse_key_opens_the_pulse_port_with_pulse_source_set(monkeypatch):
    sd = devices.import_sounddevice()
    listing = [{"name": "sysdefault", "hostapi": 0, "max_input_channels": 2, "max_output_channels": 2,
                "default_samplerate": 48000.0},
               {"name": "pulse", "hostapi": 0, "max_input_channels": 32, "max_output_channels": 32,
                "default_samplerate": 44100.0}]
    seen: dict[str, object] = {}

    class Stream:
        def __init__(self, **kw):
            seen.update(kw, env=os.environ.get("PULSE_SOURCE"))

        def start(self): pass

        def abort(self): pass

        def close(self): pass

    monkeypatch.setattr(sd, "query_devices", lambda *a, **k: listing)
    monkeypatch.setattr(sd, "query_hostapis", lambda *a, **k: [{"name": "ALSA"}])
    monkeypatch.setattr(sd, "default", SimpleNamespace(device=(0, 0)))
    monkeypatch.setattr(sd, "InputStream", Stream)
    monkeypatch.delenv("PULSE_SOURCE", raising=False)
    m = mic.Microphone("pulse:alsa_input.usb-Logitech_H390-00.mono-fallback")
    m.start()
    try:
        assert seen["device"] == 1 and seen["env"] == "alsa_input.usb-Logitech_H390-00.mono-fallback"
        assert "PULSE_SOURCE" not in os.environ  # only while the stream opened
        assert not devices.rescan()  # a stream is open: PortAudio is not restarted under it
    finally:
        m.close()


def test_a_microphone_plugged_in_later_is_found_when_the_call_page_looks_again(monkeypatch):
    """PortAudio lists its devices when it starts; the new one shows only after a re-scan."""
    sd = devices.import_sounddevice()
    plugged = {"now": False}
    seen = {"listing": []}
    headset = {"name": "USB Headset", "hostapi": 0, "max_input_channels": 1, "max_output_channels": 0,
               "default_samplerate": 48000.0}

    def initialize():
        seen["listing"] = [headset] if plugged["now"] else []

    monkeypatch.setattr(sd, "_terminate", lambda: None)
    monkeypatch.setattr(sd, "_initialize", initialize)
    monkeypatch.setattr(sd, "query_devices", lambda *a, **k: list(seen["listing"]))
    monkeypatch.setattr(sd, "query_hostapis", lambda *a, **k: [{"name": "ALSA"}])
    monkeypatch.setattr(sd, "default", SimpleNamespace(device=(-1, -1)))
    assert mic.input_problem() is not None
    plugged["now"] = True  # the headset goes in while the app runs
    assert mic.input_problem() is None
    assert mic.find_input().name == "USB Headset"


def test_the_test_tone_plays_through_the_speaker_interface_and_closes():
    clock = VirtualClock()
    speakers: list[FakeAudioOutput] = []

    def open_speaker(device):
        speakers.append(FakeAudioOutput(clock, device_rate=48000, pre_roll_ms=40))
        return speakers[-1]

    tone = ToneTest(open_speaker, seconds=0.5)
    tone.play("pulse:alsa_output.pci-0000_00_1f.3.analog-stereo")
    assert tone.playing
    clock.advance(0.3)
    speakers[0].pump()
    assert tone.poll()  # still playing
    clock.advance(0.4)
    speakers[0].pump()
    assert not tone.poll() and speakers[0]._closed  # played out: the speaker is closed
    played = speakers[0].played()
    assert 0.1 < np.abs(played).max() <= 0.21 and np.count_nonzero(np.abs(played) > 1e-3) > 0.45 * 48000


def test_the_level_meter_reads_the_microphone_interface():
    clock = VirtualClock()
    mics: list[FakeMicrophone] = []

    def open_mic(device):
        mics.append(FakeMicrophone(clock, device_rate=48000))
        return mics[-1]

    level = MicLevel(open_mic)
    level.start(None)
    clock.advance(0.2)
    mics[0].pump()
    assert level.level_db() == SILENCE_DB
    t = np.arange(48000 // 2) / 48000
    mics[0].play((0.3 * np.sin(2 * np.pi * 300 * t)).astype(np.float32), 48000, at=clock.now())
    clock.advance(0.3)
    mics[0].pump()
    assert level.level_db() > -20
    level.stop()
    assert mics[0]._closed and not level.on


def test_a_device_renumbered_by_a_rescan_opens_under_its_new_index(monkeypatch):
    sd = devices.import_sounddevice()
    headset = {"name": "USB Headset", "hostapi": 0, "max_input_channels": 1, "max_output_channels": 2,
               "default_samplerate": 48000.0}
    hdmi = {"name": "HDMI 0", "hostapi": 0, "max_input_channels": 0, "max_output_channels": 2,
            "default_samplerate": 48000.0}
    listing = [headset]
    opened: dict[str, object] = {}

    class Stream:
        def __init__(self, **kw):
            opened.update(kw)

        def start(self): pass

        def abort(self): pass

        def close(self): pass

    monkeypatch.setattr(sd, "query_devices", lambda *a, **k: list(listing))
    monkeypatch.setattr(sd, "query_hostapis", lambda *a, **k: [{"name": "ALSA"}])
    monkeypatch.setattr(sd, "default", SimpleNamespace(device=(0, 0)))
    monkeypatch.setattr(sd, "OutputStream", Stream)
    from desktop.media.audio_out import SpeakerOutput

    speaker = SpeakerOutput("USB Headset")  # chosen (index 0) before the re-scan…
    listing[:] = [hdmi, headset]  # …which numbers the devices anew
    speaker.start()
    try:
        assert opened["device"] == 1
    finally:
        speaker.close()
