"""The readiness check's decisions: from a machine's facts (model/hardware.py) to the choices the
app starts with, each with its reason in a sentence. Pure: the facts are passed in, so every
machine can be tried in a test. The device "auto" (the default) resolves through `device`."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from desktop.model.hardware import GIB, Machine
from desktop.workers.config import slot_count

MIB = 1 << 20
EMBEDDED_PARAMS = 135_000_000  # SmolLM2-135M
EMBEDDED_KV_PER_TOKEN = 2 * 30 * 3 * 64  # k and v × 30 layers × 3 KV heads × 64 dims, in elements
BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
CPU_RESERVE = 1 * GIB  # the window, speech models and the OS keep this much of the RAM
GPU_RESERVE = 0.1  # of a GPU's memory: CUDA's context and the allocator's slack
SMALLEST_GPU = 2 * GIB  # a GPU with less memory than this is not used
BF16_CAPABILITY = (8, 0)  # Ampere and later compute bf16 natively
KV_CPU_SHARE, KV_GPU_SHARE = 8, 4  # the KV budget: 1/8 of free RAM, 1/4 of a GPU's memory
KV_MIN_MB, KV_CPU_MAX_MB, KV_GPU_MAX_MB = 128, 8192, 32768


@dataclass(frozen=True)
class Choice:
    value: str | int | float | bool
    reason: str


@dataclass(frozen=True)
class Choices:
    device: Choice  # "cuda" (one worker per GPU) or "cpu"
    workers: Choice  # GPUs used, or 1 CPU worker
    dtype: Choice
    threads: Choice  # CPU threads of the model
    kv_budget_mb: Choice
    slots: Choice  # 0: automatic (as many as the KV budget holds)
    embedded_fits: Choice
    largest_model_b: Choice  # billions of parameters that fit, in the chosen dtype
    fingerprint: str

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> Choices:
        return cls(**{k: Choice(**data[k]) for k in cls.__dataclass_fields__ if k != "fingerprint"},
                   fingerprint=str(data["fingerprint"]))


def decide(m: Machine) -> Choices:
    gpus = [g for g in m.gpus if g.memory_bytes >= SMALLEST_GPU]
    on_gpu = bool(gpus)
    device = _device(m, gpus)
    threads = threads_for(m.physical_cores)
    if gpus:
        threads = Choice(threads.value, threads.reason + " They run the model if a GPU cannot load it.")
    kv_mb, kv_reason = _kv_budget(m, gpus)
    room = _room(m, gpus, kv_mb)
    dtype = _dtype(m, gpus, room)
    per_param = BYTES[str(dtype.value)]
    embedded = EMBEDDED_PARAMS * per_param
    fits = room >= embedded
    gpu_name = "the smallest GPU's" if len(gpus) > 1 else "the GPU's"
    where = f"{gpu_name} {_gb(min(g.memory_bytes for g in gpus))}" if on_gpu else f"{_gb(m.ram_available)} of free RAM"
    embedded_reason = (f"The embedded model ({_gb(embedded)} in {dtype.value}) fits in {where}, next to the KV budget."
                       if fits else
                       f"The embedded model needs {_gb(embedded)} but {_left(room)} of {where} after the KV "
                       f"budget and {_gb(CPU_RESERVE)} for the app: close other programs first.")
    largest = round(max(room, 0) / per_param / 1e9, 1)
    per_token = EMBEDDED_KV_PER_TOKEN * per_param
    slots = slot_count(kv_mb * MIB, per_token)
    return Choices(
        device=device,
        workers=Choice(len(gpus) if on_gpu else 1,
                       ("One worker on the GPU." if len(gpus) == 1 else f"One worker on each of the {len(gpus)} GPUs.")
                       if on_gpu else "One worker on the CPU, using its cores."),
        dtype=dtype,
        threads=threads,
        kv_budget_mb=Choice(kv_mb, kv_reason),
        slots=Choice(0, f"As many conversations as the KV budget holds (about {slots} short ones "
                        f"of the embedded model)."),
        embedded_fits=Choice(fits, embedded_reason),
        largest_model_b=Choice(largest, f"A local model of up to about {largest:g}B parameters in {dtype.value} "
                                        f"fits in {where} (weights plus the KV budget)." if largest >= 0.1 else
                                        f"No room for a larger model in {where}."),
        fingerprint=m.fingerprint(),
    )


def device(setting: str, choices: Choices) -> str:
    """The device the workers are made for: the setting itself unless it is "auto"."""
    return str(choices.device.value) if setting == "auto" else setting


def _device(m: Machine, gpus: list) -> Choice:
    if gpus:
        names = ", ".join(sorted({g.name for g in gpus}))
        return Choice("cuda", f"{len(gpus)} GPU{'s' if len(gpus) > 1 else ''} found ({names}): the model runs there.")
    if m.gpus:
        return Choice("cpu", f"The GPU has less than {_gb(SMALLEST_GPU)} of memory: the CPU is faster for this.")
    if m.gpu_note:
        return Choice("cpu", f"No GPU could be used ({m.gpu_note}): the model runs on the CPU.")
    return Choice("cpu", "No GPU found: the model runs on the CPU.")


def threads_for(cores: int) -> Choice:
    """The model's CPU threads on a CPU of `cores` physical cores."""
    if cores >= 4:
        return Choice(cores - 1, f"{cores} physical cores: one is left for the window and the audio.")
    if cores >= 2:
        return Choice(cores - 1, f"Only {cores} physical cores: one is left for the window (with all of them, "
                                 f"decoding next to a busy window was ~10× slower, bench/ui_latency.py).")
    return Choice(1, "One core: the model shares it with the window.")


def _kv_budget(m: Machine, gpus: list) -> tuple[int, str]:
    if gpus:
        smallest = min(g.memory_bytes for g in gpus)
        mb = _clamp(smallest // KV_GPU_SHARE // MIB, KV_GPU_MAX_MB)
        return mb, f"A quarter of the GPU's {_gb(smallest)} keeps conversations' KV caches (at most {KV_GPU_MAX_MB // 1024} GB)."
    mb = _clamp(m.ram_available // KV_CPU_SHARE // MIB, KV_CPU_MAX_MB)
    if mb == KV_MIN_MB:
        return mb, f"The least that keeps a conversation's KV cache: only {_gb(m.ram_available)} of RAM is free."
    return mb, f"An eighth of the {_gb(m.ram_available)} of free RAM keeps conversations' KV caches (at most {KV_CPU_MAX_MB // 1024} GB)."


def _room(m: Machine, gpus: list, kv_mb: int) -> int:
    """Bytes left for the weights once the KV budget and the reserve are set aside."""
    if gpus:
        smallest = min(g.memory_bytes for g in gpus)
        return int(smallest * (1 - GPU_RESERVE)) - kv_mb * MIB
    return m.ram_available - CPU_RESERVE - kv_mb * MIB


def _dtype(m: Machine, gpus: list, room: int) -> Choice:
    if gpus:
        low = min(g.capability for g in gpus)
        if low >= BF16_CAPABILITY:
            return Choice("bfloat16", "The GPU computes bf16 natively: half the memory of fp32 at full speed.")
        return Choice("float16", f"This GPU (compute {low[0]}.{low[1]}) has no fast bf16: float16 instead.")
    if m.native_bf16():
        return Choice("bfloat16", "The CPU computes bf16 natively (AVX512-BF16 or AMX): half the memory, faster.")
    if room < EMBEDDED_PARAMS * BYTES["float32"] <= room * 2:
        return Choice("bfloat16", "fp32 would not fit in the free RAM; bf16 does (slower on this CPU, but it fits).")
    simd = "AVX-512" if "avx512f" in m.cpu_flags else "AVX2" if "avx2" in m.cpu_flags else "no wide vector units"
    return Choice("float32", f"The CPU ({simd}) has no native bf16: float32 is faster than emulated bf16.")


def _left(room: int) -> str:
    return "nothing is left" if room <= 0 else f"only {_gb(room)} is left"


def _clamp(mb: int, most: int) -> int:
    return max(KV_MIN_MB, min(most, mb // 64 * 64))


def _gb(n: int | float) -> str:
    return f"{n / GIB:.1f} GB" if n >= GIB else f"{n / MIB:.0f} MB"
