"""The fingerprint of the model that made a snapshot: a snapshot is loaded only by the same
weights, in the same dtype, through a runner with the same KV layout.

The weights are known by their files (path, size, modification time) when the model was loaded
from a folder or a file; a model built in code (the tiny test models) by a hash of its weights,
computed once per model object."""

from __future__ import annotations

import hashlib
import weakref
from pathlib import Path
from typing import Any

import torch
import xxhash

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".pth")
_hashed: "weakref.WeakKeyDictionary[Any, str]" = weakref.WeakKeyDictionary()


def fingerprint(model: Any, dtype: str, kv_layout: str) -> str:
    """Hex digest naming (weights, dtype, KV layout)."""
    parts = [weights_identity(model), str(dtype), kv_layout]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def weights_identity(model: Any) -> str:
    source = str(getattr(getattr(model, "config", None), "_name_or_path", "") or "")
    files = _weight_files(Path(source)) if source else []
    if files:
        rows = []
        for f in files:
            st = f.stat()
            rows.append(f"{f.resolve()}|{st.st_size}|{st.st_mtime_ns}")
        return "files:" + ";".join(rows)
    return "hash:" + _weights_hash(model)


def _weight_files(path: Path) -> list[Path]:
    try:
        if path.is_file():
            return [path]
        if path.is_dir():
            return sorted(p for p in path.iterdir() if p.suffix in WEIGHT_SUFFIXES and p.is_file())
    except OSError:
        pass
    return []


def _weights_hash(model: Any) -> str:
    try:
        return _hashed[model]
    except (KeyError, TypeError):
        pass
    h = xxhash.xxh3_128()
    with torch.no_grad():
        for name, t in sorted(model.state_dict().items()):
            t = t.detach().to("cpu").contiguous()
            h.update(f"{name}|{t.dtype}|{tuple(t.shape)}".encode())
            if t.numel():
                h.update(t.view(torch.uint8).numpy().data)
    digest = h.hexdigest()
    try:
        _hashed[model] = digest
    except TypeError:
        pass
    return digest
