"""A later start of a Llama folder for the static runner, in about the time torch takes to import:
the weights are mapped from the packed file that the first start wrote (model/llama_weights.py,
in FastLlama's final layout, int4 packs included), and the tokenizer is built by its own class,
so neither the transformers model code nor AutoConfig (whose import alone took 4-5 s on 2 busy
cores) is imported. The first start loads the folder through transformers and writes the file."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch

from desktop.model import llama_weights
from desktop.model.llama_weights import JsonConfig, LlamaWeights
from desktop.safefile import load_json

log = logging.getLogger(__name__)
PACKED_DIR = "packed"  # beside the folder's own files (a subfolder: the snapshots' fingerprint reads the files only)
OWN_CLASSES = ("TokenizersBackend", "PreTrainedTokenizerFast")  # tokenizer.json alone describes these
NO_REMOTE = {"local_files_only": True, "trust_remote_code": False}


def packed_path(folder: Path, dtype: str, device: str) -> Path:
    """The packed file of `folder` for a dtype on a device (int4 packs only where the CPU uses them)."""
    from desktop.model.fast_llama import can_pack

    int4 = "-int4" if can_pack(getattr(torch, dtype), torch.device(device)) else ""
    return folder / PACKED_DIR / f"llama-{dtype}{int4}.safetensors"


def source_of(folder: Path) -> str:
    """What the packed file was made from: the folder's weight files (name, size, mtime)."""
    return llama_weights.identity(sorted(folder.glob("*.safetensors")))


def read_packed(folder: Path, config: dict, dtype: str, device: str) -> LlamaWeights | None:
    """The folder's packed weights for `dtype` on `device`, or None (none yet, or stale)."""
    if config.get("model_type") != "llama":
        return None
    cfg = JsonConfig(**{**config, "_name_or_path": str(folder)})
    return llama_weights.read(packed_path(folder, dtype, device), source_of(folder), cfg, device)


def write_packed(model: Any, folder: Path, dtype: str, device: str) -> LlamaWeights | None:
    """Pack a loaded transformers model (fuse, look for int4) and write the file for later starts.
    None where FastLlama cannot run the model; a file that cannot be written is only logged."""
    from desktop.model.fast_llama import can_pack, supported

    if supported(model) is not None:
        return None
    weights = llama_weights.from_model(model)
    if can_pack(weights.dtype, weights.device):
        weights.find_int4()
    try:
        llama_weights.save(weights, packed_path(folder, dtype, device), source_of(folder))
    except OSError as exc:
        log.warning("The packed weights for %s were not written (%s); the next start loads it the slow way.", folder, exc)
    return weights


def own_tokenizer(folder: Path) -> Any | None:
    """The folder's tokenizer built by the class its tokenizer_config.json names, where that is
    the plain tokenizers class (what AutoTokenizer would pick too); None: leave it to AutoTokenizer."""
    try:
        name = load_json(folder / "tokenizer_config.json", 1 << 20).get("tokenizer_class")
    except (OSError, ValueError, AttributeError):
        return None
    if name not in OWN_CLASSES or not (folder / "tokenizer.json").is_file():
        return None
    from transformers import TokenizersBackend

    return TokenizersBackend.from_pretrained(folder, **NO_REMOTE)
