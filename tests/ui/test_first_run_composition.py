"""The composition shows the first-run page on a first start (the model loading behind it), and
not again once the user went on, until the hardware changes; "Change…" opens Settings → Model."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QLabel

import desktop.composition as composition
from desktop.model.hardware import GIB, Gpu, Machine
from desktop.model.loader import ModelSpec
from desktop.settings import Settings, config_dir
from desktop.workers.config import WorkerConfig
from desktop.workers.readiness_store import check
from desktop.workers.thread_host import ThreadHost


@pytest.fixture
def env(tmp_path, monkeypatch):
    for name in ("CONFIG", "DATA", "LOG"):
        monkeypatch.setenv(f"OMNIDESK_{name}_DIR", str(tmp_path / name.lower()))
    # a user's model (not a test model: the page is shown for it), served here by the tiny one
    monkeypatch.setattr(composition, "engine_hosts",
                        lambda s: [ThreadHost("cpu0", ModelSpec("tiny"), WorkerConfig(num_slots=2), threads=1)])
    return tmp_path


def machine(gpus=()):
    def probe(cache_dir, *, gpus: bool) -> Machine:
        return Machine(4, 8, 16 * GIB, 10 * GIB, 50 * GIB, frozenset({"avx2"}), found if gpus else ())
    found = tuple(gpus)
    return probe


def start(env, qapp, aloop, monkeypatch, gpus=()):
    monkeypatch.setattr(composition, "readiness",
                        lambda: check(config_dir(), env, probe_machine=machine(gpus), list_gpus=lambda: [g.name for g in gpus]))
    comp = composition.Composition(qapp, Settings(model_source=str(env / "my-model.gguf")),
                                   settings_path=env / "config" / "settings.json")
    comp.start()
    aloop.run(comp.wait_ready(60))
    return comp


def test_first_start_shows_the_page_once(env, qapp, aloop, qtbot, monkeypatch):
    comp = start(env, qapp, aloop, monkeypatch)
    page = comp.first_run_page
    assert page is not None and page.isVisible() and page.parent() is comp.window
    assert comp.engine.model_name  # the model loaded behind the page
    with qtbot.waitSignal(page.finished, timeout=2000):
        page.cont.click()
    aloop.run(comp.shutdown(), 30)
    again = start(env, qapp, aloop, monkeypatch)
    assert again.first_run_page is None  # seen: not shown again on the same machine
    aloop.run(again.shutdown(), 30)
    gpu = start(env, qapp, aloop, monkeypatch, gpus=(Gpu(0, "NVIDIA RTX 4090", 24 * GIB, (8, 9)),))
    page = gpu.first_run_page
    assert page is not None and "hardware changed" in " ".join(label.text() for label in page.findChildren(QLabel))
    assert "RTX 4090" in " ".join(label.text() for label in page.findChildren(QLabel))
    with qtbot.waitSignal(page.change_requested, timeout=2000):
        page.change.click()
    assert gpu.settings_dialog is not None and gpu.settings_dialog.current_page() == "Model"
    aloop.run(gpu.shutdown(), 30)


def test_a_gpu_that_cannot_load_leaves_a_model_and_a_notice(env, qapp, aloop, monkeypatch):
    from desktop.protocol import WorkerHost, WorkerState, WorkerStatus
    from desktop.workers.fallback_host import CpuFallback

    class FailingGpu(WorkerHost):
        worker_id = "gpu0"

        def start(self, sink) -> None:
            sink("gpu0", WorkerStatus("gpu0", WorkerState.ERROR, "CUDA out of memory", device="cuda:0", code="model_load"))

        def submit(self, cmd) -> None: ...

        def close(self, timeout: float = 5.0) -> None: ...

    monkeypatch.setattr(composition, "engine_hosts", lambda s: [CpuFallback(
        FailingGpu(), lambda: ThreadHost("cpu0", ModelSpec("tiny"), WorkerConfig(num_slots=2), threads=1))])
    comp = composition.Composition(qapp, Settings(model_source="tiny"), settings_path=env / "config" / "settings.json")
    comp.start()
    assert aloop.run(comp.wait_ready(60))
    assert comp.engine.model_name and not comp.window.banner.error
    shown = comp.window.status.currentMessage() + comp.window.status.toolTip()
    assert "Running on the CPU" in shown and "out of memory" in shown
    aloop.run(comp.shutdown(), 30)
