"""dtype "auto": bf16 where the hardware computes it natively, float32 elsewhere; the settings
default is auto and the loader reports the dtype it really used."""

from __future__ import annotations

import pytest

from desktop.model import dtype as dtypes
from desktop.model.loader import ModelSpec, load_model
from desktop.settings import Settings


def _cpuinfo(tmp_path, flags: str):
    path = tmp_path / "cpuinfo"
    path.write_text(f"processor\t: 0\nflags\t\t: fpu sse2 avx2 {flags}\n")
    dtypes.cpu_has_native_bf16.cache_clear()
    return str(path)


@pytest.mark.parametrize(("flags", "native"), [("avx512f avx512_bf16", True), ("amx_bf16 amx_tile", True),
                                               ("avx512f avx512bw", False), ("", False)])
def test_native_bf16_read_from_cpu_flags(tmp_path, flags, native):
    assert dtypes.cpu_has_native_bf16(_cpuinfo(tmp_path, flags)) is native
    dtypes.cpu_has_native_bf16.cache_clear()


def test_resolve_keeps_an_explicit_choice_and_prefers_bf16_on_gpu(monkeypatch):
    monkeypatch.setattr(dtypes, "cpu_has_native_bf16", lambda: False)
    assert dtypes.resolve("float16", "cpu") == "float16"
    assert dtypes.resolve("auto", "cpu") == "float32"
    assert dtypes.resolve("auto", "cuda:1") == "bfloat16"
    monkeypatch.setattr(dtypes, "cpu_has_native_bf16", lambda: True)
    assert dtypes.resolve("auto", "cpu") == "bfloat16"
    assert dtypes.resolve("float32", "cpu") == "float32"


def test_settings_default_is_auto_and_the_loader_says_what_it_used(monkeypatch):
    assert Settings().dtype == "auto"
    monkeypatch.setattr(dtypes, "cpu_has_native_bf16", lambda: True)
    lm = load_model(ModelSpec("tiny", "auto"))
    assert lm.dtype == "bfloat16" and next(lm.model.parameters()).dtype.__repr__() == "torch.bfloat16"
    assert lm.kv_bytes_per_token == load_model(ModelSpec("tiny", "float32")).kv_bytes_per_token // 2
