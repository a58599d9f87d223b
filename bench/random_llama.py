"""Random-init Llama models of real shapes for the GPU benchmarks: no download, the weights'
values do not matter for speed. Built straight on the device in the asked dtype, with the default
model's tokenizer (a folder holding tokenizer.json, tokenizer_config.json and chat_template.jinja;
by default the converted embedded model's). `tiny-random` runs anywhere (the CPU twin of the GPU
check); the big shapes need CUDA."""

from __future__ import annotations

from pathlib import Path

import torch

from desktop.errors import ModelLoadError
from desktop.model.loader import LoadedModel, context_length, kv_bytes_per_token

SHAPES = {
    # Llama 3.1 8B's shape (7.4 B parameters with this vocabulary), context raised to 32k for a 17k history
    "8b-random": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                      num_key_value_heads=8, vocab_size=49152, max_position_embeddings=32768),
    # Llama 3.2 1B's shape (tied embeddings)
    "1b-random": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                      num_key_value_heads=8, vocab_size=49152, max_position_embeddings=32768, tie_word_embeddings=True),
    # small enough for a 2-core CPU: the GPU script's CPU mode runs it end to end
    "tiny-random": dict(hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_attention_heads=8,
                        num_key_value_heads=2, vocab_size=49152, max_position_embeddings=8192),
}
NEEDS_CUDA = ("8b-random", "1b-random")


def build(shape: str, dtype: str, tokenizer_dir: str | None, device: str) -> LoadedModel:
    """The `shape` Llama (see SHAPES) built on `device` in `dtype` (a torch dtype's name or "auto")."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig

    from desktop.model.chat_template import ChatTemplate
    from desktop.model.default_model import ensure_converted
    from desktop.model.dtype import resolve

    dtype = resolve(dtype, device)

    hint = ("; pass --tokenizer DIR, a folder with the default model's tokenizer.json, tokenizer_config.json "
            "and chat_template.jinja (copied from the converted default model's folder)")
    folder = None
    try:
        folder = Path(tokenizer_dir).expanduser() if tokenizer_dir else ensure_converted(lambda stage, fraction: None)
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True, trust_remote_code=False)
    except ModelLoadError as exc:
        raise ModelLoadError(f"No tokenizer for {shape}: {exc}{hint}") from exc
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"No tokenizer for {shape} in {folder}: {exc}{hint}") from exc
    config = LlamaConfig(**SHAPES[shape], bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
    model.eval()
    return LoadedModel(model, tokenizer, ChatTemplate(tokenizer), shape, context_length(config),
                       kv_bytes_per_token(config, dtype), device, dtype)
