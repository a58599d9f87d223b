"""Which floating-point type a model runs in when the user leaves it on "auto": bfloat16 on a GPU
and on a CPU that computes bf16 natively (AVX512-BF16 or AMX), float32 elsewhere (bf16 emulated in
software is slower than fp32). float32 stays the exact mode the equivalence tests use."""

from __future__ import annotations

import functools
import platform
from pathlib import Path

AUTO = "auto"
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")


@functools.cache
def cpu_has_native_bf16(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """True when the CPU advertises a bf16 dot-product instruction (Linux: /proc/cpuinfo flags;
    Apple silicon: ARMv8.6 BF16). Unknown platforms answer False (fp32 is always correct)."""
    try:
        text = Path(cpuinfo).read_text(errors="replace")
    except OSError:
        return platform.system() == "Darwin" and platform.machine() == "arm64"
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith(("flags", "Features"))), [])
    return any(flag in flags for flag in (*NATIVE_BF16_FLAGS, "bf16"))


def resolve(dtype: str, device: str) -> str:
    """The dtype to load with: `dtype` itself unless it is "auto"."""
    if dtype != AUTO:
        return dtype
    if device.startswith("cuda") or cpu_has_native_bf16():
        return "bfloat16"
    return "float32"
