"""Reading a GGUF (the embedded model's first-run conversion, or a GGUF model file) draws no tqdm
bar on stderr: transformers' GGUF reader uses tqdm itself, past disable_progress_bar(). The
reader is faked here (no real GGUF): it draws its bar through the module's own `tqdm` name."""

from __future__ import annotations

import pytest
from transformers import AutoModelForCausalLM
from transformers import modeling_gguf_pytorch_utils as reader

from desktop.model import default_model
from desktop.model.loader import ModelSpec, load_model
from desktop.errors import ModelLoadError


class _Read(Exception):
    pass


def _reading_from_pretrained(*_args, **_kwargs):
    for _ in reader.tqdm(range(50), desc="Converting and de-quantizing GGUF tensors..."):
        pass
    raise _Read  # enough: what matters is what reached stderr


def test_the_fake_reader_draws_a_bar_unless_silenced(capfd):
    with pytest.raises(_Read):
        _reading_from_pretrained()
    assert "de-quantizing" in capfd.readouterr().err  # the bar the user saw on first start


def test_conversion_draws_no_bar(tmp_path, monkeypatch, capfd):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", _reading_from_pretrained)
    bar = reader.tqdm
    with pytest.raises(_Read):
        default_model.convert_gguf(gguf, tmp_path / "out")
    assert "de-quantizing" not in capfd.readouterr().err
    assert reader.tqdm is bar  # restored, also after an error


def test_loading_a_gguf_draws_no_bar(tmp_path, monkeypatch, capfd):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", _reading_from_pretrained)
    monkeypatch.setattr("transformers.AutoTokenizer.from_pretrained", lambda *a, **k: object())
    with pytest.raises((_Read, ModelLoadError)):
        load_model(ModelSpec(str(gguf)))
    assert "de-quantizing" not in capfd.readouterr().err
