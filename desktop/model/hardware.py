"""What this computer has, as the readiness check (readiness.py) reads it: the GPUs (count, memory,
compute capability), the CPU (physical cores, the bf16 / AMX / AVX-512 / AVX2 flags), RAM and the
free disk in the cache folder. All of it lands in one frozen `Machine`, so that tests inject any
machine they like. The GPUs are asked in a short child process: the caller (the window's process)
never holds a CUDA context for them."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

log = logging.getLogger(__name__)

GIB = 1 << 30
FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "bf16")  # the ones the choices read
GPU_PROBE_S = 60.0  # the child that asks CUDA; a driver that hangs longer counts as no GPU


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    memory_bytes: int
    capability: tuple[int, int] = (0, 0)  # CUDA compute capability (8, 0): A100; (9, 0): H100


@dataclass(frozen=True)
class Machine:
    """The facts. `gpu_note`: why no GPU was found where one might have been (a broken driver)."""

    physical_cores: int
    logical_cores: int
    ram_total: int
    ram_available: int
    disk_free: int
    cpu_flags: frozenset[str] = frozenset()
    gpus: tuple[Gpu, ...] = ()
    system: str = "Linux"
    gpu_note: str = ""

    def fingerprint(self) -> str:
        """What, when it changes, makes the check run again: the GPUs, the cores and the RAM (to
        the GiB). Free memory and disk move all the time and are left out."""
        key = [[g.name, g.memory_bytes // GIB, list(g.capability)] for g in self.gpus]
        key += [self.physical_cores, self.ram_total // GIB, self.system]
        return hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16]

    def native_bf16(self) -> bool:
        return bool(self.cpu_flags & {"avx512_bf16", "amx_bf16", "bf16"})

    def to_json(self) -> dict:
        out = asdict(self)
        out["cpu_flags"] = sorted(self.cpu_flags)
        out["gpus"] = [{**asdict(g), "capability": list(g.capability)} for g in self.gpus]
        return out

    @classmethod
    def from_json(cls, data: dict) -> Machine:
        gpus = tuple(Gpu(int(g["index"]), str(g["name"]), int(g["memory_bytes"]), tuple(g["capability"]))  # type: ignore[arg-type]
                     for g in data.get("gpus", ()))
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data and k not in ("gpus", "cpu_flags")}
        return cls(**known, cpu_flags=frozenset(data.get("cpu_flags", ())), gpus=gpus)


def probe(cache_dir: Path, *, gpus: bool = True) -> Machine:
    """This computer's facts (a second or less; the GPU child only when torch sees a GPU)."""
    total, available = ram()
    found, note = probe_gpus() if gpus else ((), "")
    return Machine(physical_cores=physical_cores(), logical_cores=os.cpu_count() or 1, ram_total=total,
                   ram_available=available, disk_free=disk_free(cache_dir), cpu_flags=cpu_flags(),
                   gpus=found, system=platform.system(), gpu_note=note)


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> frozenset[str]:
    """The flags of FLAGS that the CPU advertises (Linux: /proc/cpuinfo; Apple silicon: bf16)."""
    try:
        text = Path(cpuinfo).read_text(errors="replace")
    except OSError:
        return frozenset({"bf16"}) if platform.system() == "Darwin" and platform.machine() == "arm64" else frozenset()
    line = next((ln.split(":", 1)[1] for ln in text.splitlines() if ln.startswith(("flags", "Features"))), "")
    return frozenset(line.split()) & frozenset(FLAGS)


def physical_cores(cpuinfo: str = "/proc/cpuinfo") -> int:
    """Cores, not hardware threads: distinct (physical id, core id) pairs on Linux, else psutil's
    count, else the logical count."""
    try:
        pairs, phys = set(), "0"
        for line in Path(cpuinfo).read_text(errors="replace").splitlines():
            name, _, value = line.partition(":")
            if name.strip() == "physical id":
                phys = value.strip()
            elif name.strip() == "core id":
                pairs.add((phys, value.strip()))
        if pairs:
            return len(pairs)
    except OSError:
        pass
    try:
        import psutil

        return psutil.cpu_count(logical=False) or os.cpu_count() or 1
    except ImportError:
        return os.cpu_count() or 1


def ram(meminfo: str = "/proc/meminfo") -> tuple[int, int]:
    """(total, available) bytes."""
    try:
        fields = {}
        for line in Path(meminfo).read_text().splitlines():
            name, _, value = line.partition(":")
            fields[name] = int(value.split()[0]) * 1024
        return fields["MemTotal"], fields.get("MemAvailable", fields.get("MemFree", 0))
    except (OSError, KeyError, ValueError, IndexError):
        pass
    try:
        import psutil

        mem = psutil.virtual_memory()
        return mem.total, mem.available
    except ImportError:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") if hasattr(os, "sysconf") else 0
        return total, total // 2


def disk_free(folder: Path) -> int:
    """Free bytes on the disk that holds `folder` (its nearest existing parent)."""
    for place in (folder, *folder.parents):
        try:
            return shutil.disk_usage(place).free
        except OSError:
            continue
    return 0


def driver_gpus(proc: str = "/proc/driver/nvidia/gpus") -> list[str]:
    """The NVIDIA GPUs the driver sees, by model name, without importing torch (the window's
    process never does): Linux lists them in /proc; elsewhere `nvidia-smi -L` does ([] without)."""
    folder = Path(proc)
    if folder.is_dir():
        try:
            return sorted(_model_name(entry / "information") for entry in folder.iterdir())
        except OSError:
            return []
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        done = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return sorted(line.split(":", 1)[1].split("(UUID")[0].strip() for line in done.stdout.splitlines()
                  if line.startswith("GPU ") and ":" in line)


def _model_name(information: Path) -> str:
    try:
        return next((line.split(":", 1)[1].strip() for line in information.read_text(errors="replace").splitlines()
                     if line.startswith("Model:")), "GPU")
    except OSError:
        return "GPU"


def gpu_count() -> int:
    return len(driver_gpus())


def probe_gpus(timeout_s: float = GPU_PROBE_S) -> tuple[tuple[Gpu, ...], str]:
    """(the CUDA GPUs, a note when asking failed), asked in a child process (torch and a CUDA
    context stay out of this one). No GPU, or a torch without CUDA: ((), "")."""
    if gpu_count() == 0:
        return (), ""
    try:
        done = subprocess.run([sys.executable, "-m", "desktop.model.hardware"], capture_output=True, text=True,
                              timeout=timeout_s, check=True)
        return tuple(Gpu(g["index"], g["name"], g["memory_bytes"], tuple(g["capability"]))  # type: ignore[misc]
                     for g in json.loads(done.stdout.strip().splitlines()[-1])), ""
    except subprocess.TimeoutExpired:
        return (), f"the GPU driver did not answer within {timeout_s:.0f} s"
    except (subprocess.CalledProcessError, OSError, ValueError, KeyError, IndexError, TypeError) as exc:
        detail = (getattr(exc, "stderr", "") or str(exc)).strip()
        return (), f"the GPUs could not be read ({detail.splitlines()[-1] if detail else type(exc).__name__})"


def _gpus_here() -> list[dict]:
    import torch

    if not torch.cuda.is_available():
        return []
    out = []
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        out.append({"index": i, "name": props.name, "memory_bytes": int(props.total_memory),
                    "capability": [props.major, props.minor]})
    return out


if __name__ == "__main__":  # the GPU child: one JSON line
    print(json.dumps(_gpus_here()))
