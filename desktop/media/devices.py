"""Sound devices as the settings page and the speaker see them, listed without ever raising: when
PortAudio or the devices are missing the lists are empty and come with a plain reason. PortAudio
lists devices once per initialisation: `rescan()` starts it again while no stream is open."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, replace
from typing import Any

from desktop.errors import OmnideskError
from desktop.media.pulse import PREFIX

log = logging.getLogger(__name__)
PULSE_PORTS = ("pulse", "default")  # PortAudio (ALSA) devices that reach the Pulse/PipeWire server
_streams = 0  # PortAudio streams open now (a re-scan would close them)
_streams_lock = threading.Lock()

NO_OUTPUT = "No sound output device found — audio is off"
NO_INPUT = "No microphone found — voice input is off"


class AudioUnavailable(OmnideskError):
    """No usable sound device (or no PortAudio): the app keeps working without audio."""

    code = "audio_unavailable"


@dataclass(frozen=True, slots=True)
class AudioDevice:
    index: int
    name: str
    hostapi: str
    channels: int  # max channels in the listed direction
    default_samplerate: float
    is_default: bool
    pulse_name: str = ""  # a Pulse source/sink opened through this ("pulse") device, if any


def import_sounddevice() -> Any:
    """The sounddevice module; AudioUnavailable when it or the PortAudio library is missing."""
    try:
        import sounddevice
    except (ImportError, OSError) as exc:  # OSError: "PortAudio library not found"
        raise AudioUnavailable(f"{NO_OUTPUT} (the PortAudio library is missing)") from exc
    return sounddevice


def stream_opened() -> None:
    """A microphone or speaker stream opened (no re-scan until it closes)."""
    global _streams
    with _streams_lock:
        _streams += 1


def stream_closed() -> None:
    global _streams
    with _streams_lock:
        _streams = max(0, _streams - 1)


def rescan() -> bool:
    """Make PortAudio look for devices again (one plugged in, PulseAudio started since), which it
    only does when it starts: only while no stream is open (stopping PortAudio would close it).
    True when it re-scanned."""
    with _streams_lock:
        if _streams:
            return False
        try:
            sd = import_sounddevice()
            sd._terminate()
            sd._initialize()
        except AudioUnavailable:
            return False
        except Exception as exc:  # PortAudioError: the next listing says what is wrong
            log.info("Re-scanning the sound devices failed: %s", exc)
            return False
    return True


def _list(kind: str) -> tuple[list[AudioDevice], str | None]:
    none = NO_OUTPUT if kind == "output" else NO_INPUT
    try:
        sd = import_sounddevice()
        raw = list(sd.query_devices())
        apis = [api["name"] for api in sd.query_hostapis()]
        default = sd.default.device[0 if kind == "input" else 1]
    except AudioUnavailable as exc:
        return [], exc.message
    except Exception as exc:  # PortAudioError and anything else a broken host API raises
        return [], f"{none} ({exc})"
    key = f"max_{kind}_channels"
    found = [
        AudioDevice(
            index=int(d["index"]) if "index" in d else i,
            name=str(d["name"]),
            hostapi=apis[d["hostapi"]] if 0 <= d["hostapi"] < len(apis) else "",
            channels=int(d[key]),
            default_samplerate=float(d["default_samplerate"]),
            is_default=(i == default),
        )
        for i, d in enumerate(raw)
        if d.get(key, 0) > 0
    ]
    return found, (None if found else none)


def output_devices() -> tuple[list[AudioDevice], str | None]:
    """Devices that can play sound, and None, or [] and the reason there are none."""
    return _list("output")


def input_devices() -> tuple[list[AudioDevice], str | None]:
    """Devices that can record sound, and None, or [] and the reason there are none."""
    return _list("input")


def reindex(device: AudioDevice, kind: str) -> AudioDevice:
    """The same device under its index now: a re-scan may number the devices anew between the
    moment a device was chosen and the moment its stream opens (matched by name and host API)."""
    found, _ = _list(kind)
    same = next((d for d in found if d.name == device.name and d.hostapi == device.hostapi), None)
    return device if same is None or same.index == device.index else replace(device, index=same.index)


def find_output(device: int | str | None = None) -> AudioDevice:
    """The output device to open: the system default for None, else by index or by a part of
    its name. Raises AudioUnavailable (plain message) when there is none."""
    found, reason = output_devices()
    if not found:
        raise AudioUnavailable(reason or NO_OUTPUT)
    chosen = pick(found, device)
    if chosen is None:
        raise AudioUnavailable(f"Sound output device {device!r} not found — audio is off")
    return chosen


def pick(found: list[AudioDevice], device: int | str | None) -> AudioDevice | None:
    """From a non-empty list: the system default for None, else the device with that index or
    the first whose name contains the text (any case); None when none matches. "pulse:<name>"
    is that Pulse source or sink, reached through PortAudio's "pulse" (or "default") device."""
    if isinstance(device, str) and device.startswith(PREFIX):
        port = next((d for name in PULSE_PORTS for d in found if d.name == name), None)
        return None if port is None else replace(port, pulse_name=device[len(PREFIX):])
    if device is None:
        return next((d for d in found if d.is_default), found[0])
    if isinstance(device, int):
        return next((d for d in found if d.index == device), None)
    exact = next((d for d in found if d.name == device), None)  # "default", not "sysdefault"
    return exact or next((d for d in found if device.lower() in d.name.lower()), None)
