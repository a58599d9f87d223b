"""Issue 23 §1: the device is "auto" by default and resolves through the readiness check where
the workers are made; a file written before, holding the old default "cpu", loads as auto."""

from __future__ import annotations

import json

from desktop.engine_hosts import engine_hosts
from desktop.model.hardware import GIB, Gpu, Machine
from desktop.settings import Settings, load_settings
from desktop.workers.fallback_host import CpuFallback
from desktop.workers.process_host import ProcessHost
from desktop.workers.readiness import decide
from desktop.workers.thread_host import ThreadHost

NO_GPU = decide(Machine(8, 16, 32 * GIB, 20 * GIB, 100 * GIB, frozenset({"avx2"})))
TWO_GPUS = decide(Machine(8, 16, 64 * GIB, 50 * GIB, 100 * GIB, frozenset({"avx2"}),
                          (Gpu(0, "A", 24 * GIB, (8, 6)), Gpu(1, "B", 24 * GIB, (8, 6)))))


def test_auto_is_the_default_and_old_files_move_to_it(tmp_path):
    assert Settings().device == "auto" and Settings().model_spec().device == "cpu"
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"device": "cpu", "settings_version": 2}))
    assert load_settings(path) == (Settings(), None)
    path.write_text(json.dumps({"device": "cuda:1", "settings_version": 2}))
    assert load_settings(path)[0].device == "cuda:1"
    path.write_text(json.dumps({"device": "cpu", "settings_version": 3}))  # chosen in this version: kept
    assert load_settings(path)[0].device == "cpu"


def test_auto_follows_the_choices(monkeypatch):
    import desktop.workers.factory as factory

    monkeypatch.setattr(factory, "cuda_devices", lambda: 5)  # the choices count: 2
    on_cpu = engine_hosts(Settings(), ready=NO_GPU)
    assert [type(h) for h in on_cpu] == [ProcessHost] and on_cpu[0].spec.device == "cpu"
    assert on_cpu[0].threads == NO_GPU.threads.value == 7
    on_gpus = engine_hosts(Settings(), ready=TWO_GPUS)
    assert [type(h) for h in on_gpus] == [CpuFallback, CpuFallback]
    assert [h.host.spec.dtype for h in on_gpus] == ["bfloat16", "bfloat16"]
    assert engine_hosts(Settings(device="cpu"), ready=TWO_GPUS)[0].spec.device == "cpu"  # a choice is kept


def test_the_test_model_stays_on_the_cpu_whatever_the_machine():
    assert [type(h) for h in engine_hosts(Settings(model_source="tiny"))] == [ThreadHost]


def test_the_kv_budget_is_automatic_too(tmp_path):
    import pytest
    from pydantic import ValidationError

    assert Settings().kv_budget_mb == 0 and Settings().worker_config().kv_budget_bytes == 2048 << 20
    assert Settings().worker_config(700).kv_budget_bytes == 700 << 20  # what the check chose
    assert Settings(kv_budget_mb=512).worker_config(700).kv_budget_bytes == 512 << 20  # a choice is kept
    with pytest.raises(ValidationError, match="at least 16 MB"):
        Settings(kv_budget_mb=8)
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"kv_budget_mb": 2048, "settings_version": 2}))
    assert load_settings(path)[0].kv_budget_mb == 0
    path.write_text(json.dumps({"kv_budget_mb": 4096, "settings_version": 2}))
    assert load_settings(path)[0].kv_budget_mb == 4096
    hosts = engine_hosts(Settings(), ready=NO_GPU)
    assert hosts[0].config.kv_budget_bytes == NO_GPU.kv_budget_mb.value << 20


def test_a_gpu_fallback_keeps_its_kv_budget_to_ram_size(monkeypatch):
    on_gpu = engine_hosts(Settings(), ready=TWO_GPUS)[0]
    assert on_gpu.host.config.kv_budget_bytes == TWO_GPUS.kv_budget_mb.value << 20 == 6 << 30
    assert on_gpu._make_cpu().config.kv_budget_bytes == 2 << 30
