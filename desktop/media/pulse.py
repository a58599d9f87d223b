"""PulseAudio/PipeWire sources and sinks as `pactl` lists them (JSON, with a timeout, parsed
defensively), and the environment that makes PortAudio's "pulse" device open one of them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

PREFIX = "pulse:"  # a saved device "pulse:<name>" is that Pulse source or sink
TIMEOUT_S = 2.0
Run = Callable[[list[str]], str | None]  # pactl's output for these arguments, or None when it failed
_env_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class PulseDevice:
    name: str  # the server's name for it (what PULSE_SOURCE / PULSE_SINK take)
    description: str  # what people read ("USB Headset Analog Stereo")
    is_default: bool = False

    @property
    def key(self) -> str:
        """What Settings keeps for it."""
        return PREFIX + self.name


def run_pactl(args: list[str]) -> str | None:
    """`pactl args` → its standard output; None without pactl, on an error or after TIMEOUT_S."""
    exe = shutil.which("pactl")
    if exe is None:
        return None
    try:
        done = subprocess.run([exe, *args], capture_output=True, text=True, timeout=TIMEOUT_S,
                              env={**os.environ, "LC_ALL": "C"})  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _json(text: str | None) -> Any:
    try:
        return json.loads(text) if text else None
    except ValueError:  # an old pactl without -f json prints text
        return None


def _is_monitor(entry: dict[str, Any]) -> bool:
    props = entry.get("properties") if isinstance(entry.get("properties"), dict) else {}
    monitor_of = entry.get("monitor_of_sink")
    return (props.get("device.class") == "monitor" or str(entry.get("name", "")).endswith(".monitor")
            or (isinstance(monitor_of, str) and monitor_of not in ("", "n/a")))


def pulse_devices(kind: str, run: Run = run_pactl) -> list[PulseDevice] | None:
    """The Pulse "sources" (microphones; the monitors of outputs left out) or "sinks"; None when
    there is no Pulse server to ask (then PortAudio's own names are all there is)."""
    entries = _json(run(["-f", "json", "list", kind]))
    if not isinstance(entries, list):
        return None
    info = _json(run(["-f", "json", "info"]))
    default = info.get("default_source_name" if kind == "sources" else "default_sink_name") \
        if isinstance(info, dict) else None
    found: list[PulseDevice] = []
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
            continue
        if kind == "sources" and _is_monitor(entry):
            continue
        description = entry.get("description")
        label = " ".join(description.split()) if isinstance(description, str) and description.strip() else entry["name"]
        found.append(PulseDevice(entry["name"], label, entry["name"] == default))
    return found


@contextmanager
def pulse_target(variable: str, name: str) -> Iterator[None]:
    """PULSE_SOURCE or PULSE_SINK set to `name` while a stream on PortAudio's "pulse" device
    opens (the ALSA pulse plugin reads it then); nothing for an empty name."""
    if not name:
        yield
        return
    with _env_lock:
        old = os.environ.get(variable)
        os.environ[variable] = name
        try:
            yield
        finally:
            if old is None:
                os.environ.pop(variable, None)
            else:
                os.environ[variable] = old
