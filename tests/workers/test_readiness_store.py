"""The readiness check as stored beside the settings: run once, kept while the machine is the
same, run again when the GPUs or the RAM change; and the /proc parsing of the probe."""

from __future__ import annotations

import json

from desktop.model import hardware
from desktop.model.hardware import GIB, Gpu, Machine
from desktop.workers.readiness_store import FILE, check, mark_seen

CPUINFO = """processor\t: 0
physical id\t: 0
core id\t: 0
flags\t\t: fpu sse avx2 avx512f avx512_bf16 amx_bf16 amx_tile
processor\t: 1
physical id\t: 0
core id\t: 0
flags\t\t: fpu sse avx2 avx512f avx512_bf16 amx_bf16 amx_tile
processor\t: 2
physical id\t: 0
core id\t: 1
processor\t: 3
physical id\t: 1
core id\t: 0
"""


class Probe:
    def __init__(self, ram_gb: int = 16, gpus: tuple = ()) -> None:
        self.ram_gb, self.gpus, self.calls = ram_gb, gpus, []

    def __call__(self, cache_dir, *, gpus: bool) -> Machine:
        self.calls.append(gpus)
        return Machine(4, 8, self.ram_gb * GIB, self.ram_gb * GIB // 2, 50 * GIB, frozenset({"avx2"}),
                       self.gpus if gpus else ())


def test_first_check_is_stored_and_shown_until_seen(tmp_path):
    probe = Probe()
    first = check(tmp_path, tmp_path, probe_machine=probe, list_gpus=list)
    assert first.show and first.choices.device.value == "cpu"
    assert json.loads((tmp_path / FILE).read_text())["seen"] is False
    again = check(tmp_path, tmp_path, probe_machine=probe, list_gpus=list)
    assert again.show and again.choices == first.choices  # not seen yet: shown again
    mark_seen(tmp_path)
    later = check(tmp_path, tmp_path, probe_machine=probe, list_gpus=list)
    assert not later.show and later.choices == first.choices


def test_a_new_gpu_or_more_ram_runs_the_check_again(tmp_path):
    check(tmp_path, tmp_path, probe_machine=Probe(), list_gpus=list)
    mark_seen(tmp_path)
    h100 = Gpu(0, "NVIDIA H100", 80 * GIB, (9, 0))
    probe = Probe(gpus=(h100,))
    with_gpu = check(tmp_path, tmp_path, probe_machine=probe, list_gpus=lambda: ["NVIDIA H100"])
    assert with_gpu.show and with_gpu.choices.device.value == "cuda" and probe.calls == [False, True]
    mark_seen(tmp_path)
    more_ram = check(tmp_path, tmp_path, probe_machine=Probe(ram_gb=64, gpus=(h100,)), list_gpus=lambda: ["NVIDIA H100"])
    assert more_ram.show and more_ram.choices.fingerprint != with_gpu.choices.fingerprint


def test_a_later_start_does_not_ask_the_gpus_unless_the_driver_lists_others(tmp_path):
    check(tmp_path, tmp_path, probe_machine=Probe(gpus=(Gpu(0, "A", 24 * GIB, (8, 6)),)), list_gpus=lambda: ["A"])
    probe = Probe()
    later = check(tmp_path, tmp_path, probe_machine=probe, list_gpus=lambda: ["A"])
    assert probe.calls == [False] and later.choices.device.value == "cuda"
    swapped = Probe(gpus=(Gpu(0, "B", 48 * GIB, (8, 9)),))
    assert check(tmp_path, tmp_path, probe_machine=swapped, list_gpus=lambda: ["B"]).show and swapped.calls == [False, True]


def test_a_broken_file_means_a_new_check(tmp_path):
    (tmp_path / FILE).write_text("{not json")
    assert check(tmp_path, tmp_path, probe_machine=Probe(), list_gpus=list).show
    data = json.loads((tmp_path / FILE).read_text())
    (tmp_path / FILE).write_text(json.dumps({**data, "seen": True, "choices": {"device": 3}}))
    redone = check(tmp_path, tmp_path, probe_machine=Probe(), list_gpus=list)
    assert redone.show and redone.choices.device.value == "cpu"


def test_proc_parsing(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text(CPUINFO)
    assert hardware.physical_cores(str(info)) == 3  # (0,0) (0,1) (1,0): hyperthreads not counted
    assert hardware.cpu_flags(str(info)) == {"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"}
    mem = tmp_path / "meminfo"
    mem.write_text("MemTotal:       16384000 kB\nMemFree:         1000 kB\nMemAvailable:    8192000 kB\n")
    assert hardware.ram(str(mem)) == (16384000 * 1024, 8192000 * 1024)
    assert hardware.disk_free(tmp_path / "not" / "yet") > 0


def test_this_machine_probes_without_a_gpu_child(tmp_path):
    m = hardware.probe(tmp_path, gpus=False)
    assert m.physical_cores >= 1 and m.logical_cores >= m.physical_cores
    assert 0 < m.ram_available <= m.ram_total and m.gpus == ()


def test_gpus_are_counted_from_the_driver_and_none_means_no_child(tmp_path, monkeypatch):
    gpus = tmp_path / "gpus"
    for bus, name in (("0000:01:00.0", "NVIDIA H100 80GB HBM3"), ("0000:02:00.0", "NVIDIA A10")):
        (gpus / bus).mkdir(parents=True)
        (gpus / bus / "information").write_text(f"Model: \t\t {name}\nIRQ:   \t\t 42\n")
    assert hardware.driver_gpus(str(gpus)) == ["NVIDIA A10", "NVIDIA H100 80GB HBM3"]
    monkeypatch.setattr(hardware.shutil, "which", lambda name: None)
    assert hardware.driver_gpus(str(tmp_path / "no-driver")) == []
    listed = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1a2b)\nGPU 1: NVIDIA A10 (UUID: GPU-3c4d)\n"
    monkeypatch.setattr(hardware.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(hardware.subprocess, "run", lambda *a, **k: type("Done", (), {"stdout": listed})())
    assert hardware.driver_gpus(str(tmp_path / "no-proc")) == ["NVIDIA A10", "NVIDIA H100 80GB HBM3"]
    monkeypatch.setattr(hardware, "gpu_count", lambda: 0)
    monkeypatch.setattr(hardware.subprocess, "run", lambda *a, **k: (_ for _ in ()).throw(AssertionError("no child")))
    assert hardware.probe_gpus() == ((), "")


def test_a_gpu_child_that_fails_becomes_a_note(monkeypatch):
    import subprocess

    monkeypatch.setattr(hardware, "gpu_count", lambda: 1)

    def broken(*args, **kwargs):
        raise subprocess.CalledProcessError(1, args[0], "", "Traceback...\nRuntimeError: CUDA driver version is insufficient")

    monkeypatch.setattr(hardware.subprocess, "run", broken)
    found, note = hardware.probe_gpus()
    assert found == () and "CUDA driver version is insufficient" in note
    monkeypatch.setattr(hardware.subprocess, "run", lambda *a, **k: (_ for _ in ()).throw(subprocess.TimeoutExpired(a[0], 5)))
    assert "did not answer within 5 s" in hardware.probe_gpus(timeout_s=5)[1]


def test_the_check_keeps_torch_out_of_the_window_process(tmp_path):
    import subprocess
    import sys

    code = ("import sys, pathlib; from desktop.workers.readiness_store import check; "
            f"p = pathlib.Path({str(tmp_path)!r}); check(p, p); print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "False"
