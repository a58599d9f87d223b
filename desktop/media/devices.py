"""Sound devices as the settings page and the speaker see them, listed without ever raising: when
PortAudio or the devices are missing the lists are empty and come with a plain reason."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from desktop.errors import OmnideskError

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


def import_sounddevice() -> Any:
    """The sounddevice module; AudioUnavailable when it or the PortAudio library is missing."""
    try:
        import sounddevice
    except (ImportError, OSError) as exc:  # OSError: "PortAudio library not found"
        raise AudioUnavailable(f"{NO_OUTPUT} (the PortAudio library is missing)") from exc
    return sounddevice


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
    the first whose name contains the text (any case); None when none matches."""
    if device is None:
        return next((d for d in found if d.is_default), found[0])
    if isinstance(device, int):
        return next((d for d in found if d.index == device), None)
    return next((d for d in found if device.lower() in d.name.lower()), None)
