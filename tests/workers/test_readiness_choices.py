"""The readiness check's decisions over injected machines: no GPU here is needed."""

from __future__ import annotations

import pytest

from desktop.model.hardware import GIB, Gpu, Machine
from desktop.workers.readiness import KV_MIN_MB, Choices, decide, device

AMX = frozenset({"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"})


def machine(cores=2, ram=8, free=None, flags=frozenset({"avx2"}), gpus=(), note="") -> Machine:
    return Machine(physical_cores=cores, logical_cores=cores * 2, ram_total=ram * GIB,
                   ram_available=int((free if free is not None else ram * 0.7) * GIB), disk_free=100 * GIB,
                   cpu_flags=flags, gpus=tuple(gpus), gpu_note=note)


H100 = Gpu(0, "NVIDIA H100 80GB HBM3", 80 * GIB, (9, 0))


def test_small_laptop_without_gpu():
    c = decide(machine(cores=2, ram=8))
    assert c.device.value == "cpu" and "No GPU" in c.device.reason
    assert c.workers.value == 1
    assert c.dtype.value == "float32" and "AVX2" in c.dtype.reason
    assert c.threads.value == 1 and "one is left for the window" in c.threads.reason
    assert 128 <= c.kv_budget_mb.value <= 1024 and c.kv_budget_mb.value % 64 == 0
    assert c.slots.value == 0 and "as the KV budget holds" in c.slots.reason
    assert c.embedded_fits.value is True
    assert 0 < c.largest_model_b.value < 2


def test_workstation_with_amx():
    c = decide(machine(cores=16, ram=64, flags=AMX))
    assert c.device.value == "cpu" and c.threads.value == 15 and "16 physical cores" in c.threads.reason
    assert c.dtype.value == "bfloat16" and "AMX" in c.dtype.reason
    assert c.kv_budget_mb.value > decide(machine(cores=16, ram=8, flags=AMX)).kv_budget_mb.value
    assert c.largest_model_b.value > 10  # ~40 GB free at 2 bytes a weight


def test_one_h100():
    c = decide(machine(cores=16, ram=128, gpus=[H100]))
    assert (c.device.value, c.workers.value, c.dtype.value) == ("cuda", 1, "bfloat16")
    assert "H100" in c.device.reason
    assert c.kv_budget_mb.value == 20 * 1024  # a quarter of 80 GB
    assert 20 < c.largest_model_b.value < 40  # (72 - 20) GB / 2 bytes
    assert c.embedded_fits.value is True and "GPU" in c.embedded_fits.reason


def test_two_gpus_one_worker_each_sized_by_the_smaller():
    small = Gpu(1, "NVIDIA RTX A4000", 16 * GIB, (8, 6))
    c = decide(machine(cores=8, ram=64, gpus=[H100, small]))
    assert c.device.value == "cuda" and c.workers.value == 2 and "2 GPUs" in c.device.reason
    assert c.kv_budget_mb.value == 4 * 1024  # a quarter of the smaller one


def test_old_gpu_gets_float16_and_a_tiny_gpu_is_skipped():
    assert decide(machine(gpus=[Gpu(0, "Tesla T4", 16 * GIB, (7, 5))])).dtype.value == "float16"
    c = decide(machine(gpus=[Gpu(0, "GeForce GT 710", 1 * GIB, (3, 5))]))
    assert c.device.value == "cpu" and "less than" in c.device.reason


def test_tiny_ram_says_what_does_not_fit():
    c = decide(machine(cores=1, ram=2, free=1.2))
    assert c.kv_budget_mb.value == KV_MIN_MB and c.threads.value == 1
    assert c.embedded_fits.value is False and "close other programs" in c.embedded_fits.reason
    assert c.largest_model_b.value == 0


def test_bf16_chosen_to_fit_when_fp32_would_not():
    assert decide(machine(cores=2, ram=4, free=3)).dtype.value == "float32"  # room enough for fp32
    squeezed = decide(machine(cores=2, ram=2, free=1.55))  # ~370 MB left: 540 MB of fp32 weights do not fit
    assert squeezed.dtype.value == "bfloat16" and "fit" in squeezed.dtype.reason
    assert squeezed.embedded_fits.value is True


def test_a_broken_driver_is_named():
    c = decide(machine(note="the GPU driver did not answer within 60 s"))
    assert c.device.value == "cpu" and "did not answer" in c.device.reason


@pytest.mark.parametrize("setting,expected", [("auto", "cuda"), ("cpu", "cpu"), ("cuda:1", "cuda:1"), ("cuda", "cuda")])
def test_device_setting_resolves(setting, expected):
    assert device(setting, decide(machine(gpus=[H100]))) == expected
    assert device("auto", decide(machine())) == "cpu"


def test_every_reason_is_a_sentence_and_choices_round_trip():
    for m in (machine(), machine(cores=16, ram=64, flags=AMX), machine(gpus=[H100]), machine(cores=1, ram=2, free=1)):
        c = decide(m)
        for name, choice in vars(c).items():
            if name != "fingerprint":
                assert not choice.reason[0].islower() and choice.reason.endswith("."), (name, choice.reason)
        assert Choices.from_json(c.to_json()) == c and c.fingerprint == m.fingerprint()


def test_fingerprint_follows_gpus_and_ram_not_free_memory():
    base = machine(ram=16, free=10)
    assert base.fingerprint() == machine(ram=16, free=3).fingerprint()
    assert base.fingerprint() != machine(ram=32, free=10).fingerprint()
    assert base.fingerprint() != machine(ram=16, free=10, gpus=[H100]).fingerprint()
    assert Machine.from_json(machine(gpus=[H100], flags=AMX).to_json()) == machine(gpus=[H100], flags=AMX)
