"""The sound devices offered in Settings → Audio: the PulseAudio/PipeWire sources and sinks by
their own names where a Pulse server answers, else PortAudio's devices (re-scanned first)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from desktop.media.devices import PULSE_PORTS, AudioDevice, input_devices, output_devices, rescan
from desktop.media.pulse import PREFIX, PulseDevice, pulse_devices

Listing = Callable[[], "tuple[list[AudioDevice], str | None]"]
PulseListing = Callable[[str], "list[PulseDevice] | None"]


@dataclass(frozen=True, slots=True)
class DeviceChoice:
    key: str  # what Settings keeps: "pulse:<name>", or a PortAudio device's name
    label: str  # what the user reads
    is_default: bool = False


@dataclass(frozen=True, slots=True)
class SoundDevices:
    """Microphones and speakers to choose from, and why there are none (None when there are)."""

    inputs: tuple[DeviceChoice, ...] = ()
    outputs: tuple[DeviceChoice, ...] = ()
    input_problem: str | None = None
    output_problem: str | None = None

    @classmethod
    def from_names(cls, names: list[str]) -> SoundDevices:
        """The same PortAudio names for both directions (what older callers pass)."""
        choices = tuple(DeviceChoice(name, name) for name in names)
        return cls(choices, choices)

    def label_of(self, key: str) -> str:
        """The name to show for a saved device, listed or not."""
        for choice in (*self.inputs, *self.outputs):
            if choice.key == key:
                return choice.label
        return key[len(PREFIX):] if key.startswith(PREFIX) else key


def _choices(found: list[AudioDevice], pulse: list[PulseDevice] | None) -> tuple[DeviceChoice, ...]:
    """Pulse's devices when there are some and PortAudio can reach them, else PortAudio's."""
    if pulse and any(d.name in PULSE_PORTS for d in found):
        return tuple(DeviceChoice(p.key, p.description, p.is_default) for p in pulse)
    return tuple(DeviceChoice(d.name, d.name, d.is_default) for d in found)


def list_sound_devices(*, inputs: Listing = input_devices, outputs: Listing = output_devices,
                       pulse: PulseListing = pulse_devices, scan: Callable[[], bool] = rescan) -> SoundDevices:
    """Everything Settings → Audio offers, looked for afresh (never raises)."""
    scan()
    ins, in_problem = inputs()
    outs, out_problem = outputs()
    return SoundDevices(_choices(ins, pulse("sources")), _choices(outs, pulse("sinks")), in_problem, out_problem)
