"""Model files for the model manager's tests, written in code: a GGUF of any architecture (the
`gguf` package's writer), a Hugging Face folder (config.json, a safetensors file, a tokenizer)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def write_gguf(path: Path, arch: str = "llama", name: str = "Tiny Llama", *, file_type: int | None = 7,
               rows: int = 64) -> Path:
    import gguf

    path.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(name)
    if file_type is not None:
        w.add_file_type(file_type)
    w.add_context_length(128)
    w.add_tensor("token_embd.weight", np.zeros((rows, 32), np.float32))
    w.add_tensor("blk.0.attn_q.weight", np.ones((32, 32), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def write_folder(folder: Path, *, model_type: str = "llama", extra: dict | None = None, tokenizer: bool = True,
                 shape: tuple[int, int] = (100, 10), vision: bool = False) -> Path:
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    config = {"model_type": model_type, "architectures": ["LlamaForCausalLM"], "torch_dtype": "bfloat16"}
    if vision:
        config["vision_config"] = {"hidden_size": 8}
    config.update(extra or {})
    (folder / "config.json").write_text(json.dumps(config))
    save_file({"w": np.zeros(shape, np.float16), "b": np.zeros((shape[0],), np.float16)}, str(folder / "model.safetensors"))
    if tokenizer:
        (folder / "tokenizer.json").write_text("{}")
    return folder
