"""Where a model runs (issue 23 §2): a .gguf file chosen by the user runs on a local llama.cpp worker
by default, or on the torch runner when the settings say so; the embedded default and model
folders stay on torch; on a GPU a GGUF takes torch (the bundled llama.cpp is CPU-only). The KV
budget and slots become the llama.cpp server's pool and slots."""

from __future__ import annotations

import pytest
from gguf_files import write_llama

from desktop.engine_hosts import engine_hosts
from desktop.model.gguf_facts import read_facts
from desktop.model.hardware import Machine
from desktop.model.loader import ModelSpec
from desktop.settings import Settings
from desktop.workers.config import WorkerConfig
from desktop.workers.factory import make_hosts
from desktop.workers.llamacpp.host import LlamaCppHost
from desktop.workers.llamacpp.plan import DEFAULT_SLOTS, MIN_POOL, ServerPlan
from desktop.workers.readiness import decide


@pytest.fixture(scope="module")
def gguf(tmp_path_factory):
    return write_llama(tmp_path_factory.mktemp("gguf") / "tiny-Q4_0.gguf", "Q4_0")


def kinds(hosts) -> list[str]:
    return [type(h).__name__ for h in hosts]


def test_a_gguf_file_runs_on_llamacpp_by_default_and_on_torch_when_chosen(gguf):
    config = WorkerConfig(num_slots=0, kv_budget_bytes=64 << 20)
    hosts = make_hosts(ModelSpec(str(gguf), "auto", "cpu"), config, cores=3)
    assert kinds(hosts) == ["LlamaCppHost"]
    assert hosts[0].plan == ServerPlan(DEFAULT_SLOTS, 64 << 20, 3) and hosts[0].path == str(gguf)
    torch_hosts = make_hosts(ModelSpec(str(gguf), "auto", "cpu"), config, cores=3, isolate=True, gguf_runner="torch")
    assert kinds(torch_hosts) == ["ProcessHost"]
    assert Settings().gguf_runner == "llamacpp"


@pytest.mark.parametrize("source", ["default", "tiny"])
def test_the_embedded_default_and_built_in_models_stay_on_torch(source):
    hosts = make_hosts(ModelSpec(source, "auto", "cpu"), WorkerConfig(), cores=2, isolate=True)
    assert "LlamaCppHost" not in kinds(hosts)


def test_on_a_gpu_a_gguf_takes_the_torch_runner(gguf):
    hosts = make_hosts(ModelSpec(str(gguf), "auto", "cuda:0"), WorkerConfig(), cores=2)
    assert "LlamaCppHost" not in kinds(hosts)
    for h in hosts:
        h.close(0.1)


def test_engine_hosts_follow_the_settings_runner(gguf):
    ready = decide(Machine(physical_cores=4, logical_cores=4, ram_total=16 << 30, ram_available=12 << 30,
                           disk_free=50 << 30))
    for runner in ("llamacpp", "torch"):
        s = Settings(model_source=str(gguf), gguf_runner=runner, device="cpu")
        hosts = engine_hosts(s, ready)
        try:
            assert isinstance(hosts[0], LlamaCppHost) == (runner == "llamacpp"), kinds(hosts)
        finally:
            for h in hosts:
                h.close(0.1)
    assert Settings(gguf_runner="torch").needs_reload(Settings()), "changing the runner reloads the model"


def test_the_kv_pool_is_the_budget_within_the_models_context(gguf):
    facts = read_facts(gguf)  # 2 layers, 2 KV heads of 8: 128 bytes a token at f16
    assert facts.kv_bytes_per_token() == 2 * 2 * 2 * 8 * 2
    assert ServerPlan(2, 0, 1).pool(facts) == facts.context_length
    assert ServerPlan(2, 1 << 30, 1).pool(facts) == facts.context_length  # never past the model's window
    assert ServerPlan(2, 1000 * 128, 1).pool(facts) == 1000
    assert ServerPlan(2, 10, 1).pool(facts) == MIN_POOL
    with pytest.raises(ValueError):
        ServerPlan(0, 0, 1)
