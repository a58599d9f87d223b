"""The readiness check as the app runs it: the stored choices (a small JSON beside the settings)
while the machine is the same, a new check when it changed. A later start reads /proc and asks
the driver how many GPUs it sees (no torch, no CUDA context); only a changed machine probes the GPUs in full."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from desktop.model.hardware import GIB, Machine, driver_gpus, probe
from desktop.safefile import load_json, write_atomic
from desktop.workers.readiness import Choices, decide

log = logging.getLogger(__name__)

FILE = "readiness.json"
MAX_BYTES = 64 << 10
FORMAT = 1


@dataclass(frozen=True)
class Readiness:
    machine: Machine
    choices: Choices
    show: bool  # the first start, or the hardware changed, and the page was not yet seen
    changed: bool = False  # checked again because the hardware changed (not the first start)


def quick_key(machine: Machine, gpus: list[str]) -> list:
    """What a later start compares without asking CUDA: the GPUs the driver lists (by model
    name), the cores, the RAM."""
    return [sorted(gpus), machine.physical_cores, machine.ram_total // GIB, machine.system]


def check(folder: Path, cache_dir: Path, *, probe_machine: Callable[..., Machine] = probe,
          list_gpus: Callable[[], list[str]] = driver_gpus) -> Readiness:
    """The choices for this machine: stored ones while its quick key is unchanged, else a new
    check (stored at once, shown on the first-run page until `seen`)."""
    path = folder / FILE
    quick = probe_machine(cache_dir, gpus=False)
    gpus = list_gpus()
    stored = _load(path)
    if stored is not None and stored.get("quick") == quick_key(quick, gpus):
        try:
            return Readiness(Machine.from_json(stored["machine"]), Choices.from_json(stored["choices"]),
                             show=not stored.get("seen", False), changed=bool(stored.get("changed", False)))
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("The stored readiness check in %s is not valid (%s): checking again", path, exc)
    machine = probe_machine(cache_dir, gpus=bool(gpus))
    choices = decide(machine)
    if stored is not None:
        log.info("The hardware changed since the last check: choices made again")
    _save(path, {"format": FORMAT, "quick": quick_key(machine, gpus), "machine": machine.to_json(),
                 "choices": choices.to_json(), "seen": False, "changed": stored is not None})
    return Readiness(machine, choices, show=True, changed=stored is not None)


def mark_seen(folder: Path) -> None:
    """The user saw the first-run page (Continue or Change): it is not shown again until the
    hardware changes."""
    path = folder / FILE
    stored = _load(path)
    if stored is not None:
        _save(path, {**stored, "seen": True})


def _load(path: Path) -> dict | None:
    try:
        data = load_json(path, MAX_BYTES)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("Could not read %s (%s): the readiness check runs again", path, exc)
        return None
    return data if isinstance(data, dict) and data.get("format") == FORMAT else None


def _save(path: Path, data: dict) -> None:
    try:
        write_atomic(path, json.dumps(data, indent=2))
    except OSError as exc:  # the choices still hold for this run
        log.warning("Could not store the readiness check in %s: %s", path, exc)
