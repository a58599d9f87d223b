"""A later start of a Llama folder for the static runner (model/fast_start.py, loader._load_packed):
the first load goes through transformers and writes the packed file; the next maps it, builds the
tokenizer by its own class, and imports neither the transformers model code nor torch._dynamo."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from desktop.model import fast_start, loader
from desktop.model.llama_weights import LlamaWeights
from desktop.model.loader import ModelSpec

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory) -> Path:
    from desktop.model.tiny import tiny_model, tiny_tokenizer

    folder = tmp_path_factory.mktemp("tiny-llama")
    tiny_model().save_pretrained(folder)
    tiny_tokenizer().save_pretrained(folder)
    return folder


def load(folder: Path):
    stages: list[str] = []
    model, tokenizer = loader._load_packed(folder, ModelSpec("tiny"), lambda s, f: stages.append(s), "")
    return model, tokenizer, stages


def test_first_load_packs_then_later_loads_map_the_file(tiny_folder, monkeypatch):
    first, tok1, stages = load(tiny_folder)
    assert isinstance(first, LlamaWeights) and "Packing the weights for a faster start…" in stages
    assert fast_start.packed_path(tiny_folder, "float32", "cpu").is_file()
    monkeypatch.setattr(loader, "_load_folder", lambda *a: pytest.fail("a later start loaded the transformers model"))
    later, tok2, stages = load(tiny_folder)
    assert isinstance(later, LlamaWeights) and "Packing the weights for a faster start…" not in stages
    assert later.config._name_or_path == str(tiny_folder)  # the snapshots' fingerprint: the same files
    text = "Hello <|im_end|> wörld 日本 🙂\n\n  x"
    assert tok2(text, add_special_tokens=False)["input_ids"] == tok1(text, add_special_tokens=False)["input_ids"]
    assert tok2.chat_template == tok1.chat_template and tok2.eos_token_id == tok1.eos_token_id


def test_changed_weights_are_packed_again(tiny_folder):
    load(tiny_folder)
    weights = next(tiny_folder.glob("*.safetensors"))
    weights.touch()  # another mtime: the folder's weights may have changed
    again, _, stages = load(tiny_folder)
    assert "Packing the weights for a faster start…" in stages and isinstance(again, LlamaWeights)


def test_a_tokenizer_of_another_class_goes_to_autotokenizer(tmp_path):
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "LlamaTokenizer"}))
    assert fast_start.own_tokenizer(tmp_path) is None
    (tmp_path / "tokenizer_config.json").write_text("{broken")
    assert fast_start.own_tokenizer(tmp_path) is None


@pytest.mark.slow
def test_a_later_start_imports_no_model_code(tiny_folder):
    """In a fresh process (a worker's): the model code and AutoConfig's import chain stay out."""
    load(tiny_folder)
    code = textwrap.dedent(f"""
        import sys
        from desktop.model import loader
        from desktop.model.loader import ModelSpec
        model, tok = loader._load_packed(__import__("pathlib").Path({str(tiny_folder)!r}), ModelSpec("tiny"),
                                         lambda s, f: None, "")
        from desktop.workers.runner import make_runner
        from desktop.workers.config import WorkerConfig
        heavy = [m for m in ("transformers.modeling_utils", "transformers.models.llama.modeling_llama",
                             "transformers.models.auto.configuration_auto", "torch._dynamo") if m in sys.modules]
        print(type(model).__name__, heavy)
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "LlamaWeights []"


@pytest.mark.real_model
@pytest.mark.slow
def test_the_embedded_model_starts_from_its_packed_weights_and_says_the_same():
    """The embedded default, later start (static runner): LlamaWeights, and the same greedy reply
    (fp32) as the transformers model loaded the old way."""
    from desktop.model.loader import load_model
    from desktop.model.messages import Message
    from desktop.model.params import SamplingParams
    from desktop.protocol import Chat, Done
    from desktop.workers.config import WorkerConfig
    from desktop.workers.local import LocalClient

    load_model(ModelSpec("default"), static=True)  # packs the weights if this machine has not yet
    fast = load_model(ModelSpec("default"), static=True)
    slow = load_model(ModelSpec("default"))
    assert isinstance(fast.model, LlamaWeights) and not isinstance(slow.model, LlamaWeights)
    assert (fast.context_length, fast.kv_bytes_per_token, fast.name) == (slow.context_length, slow.kv_bytes_per_token, slow.name)
    msgs = (Message("user", "Name three colours."),)
    replies = []
    for lm, runner in ((fast, "auto"), (slow, "static"), (slow, "hf")):
        events = LocalClient(lm, WorkerConfig(runner=runner)).run(Chat("r", msgs, SamplingParams(max_tokens=12)))
        assert isinstance(events[-1], Done)
        replies.append(list(events[-1].token_ids))
    assert replies[0] == replies[1] == replies[2]
