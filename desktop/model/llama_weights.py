"""The weights FastLlama runs, in their final layout: q/k/v and gate/up fused, the rope frequencies,
and (on CPUs that run bf16) the int4 packs of weights that lie on a 4-bit grid. Taken from a
transformers Llama model, or read back from the one safetensors file written the first time, so
a later start maps the file (mmap) and neither imports the transformers model nor packs anything."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

log = logging.getLogger(__name__)
FORMAT = "omnidesk-llama-1"  # bump when the layout changes: an older file is then rebuilt
INT4_GROUP = 32
LINEARS = ("qkv", "o", "gate_up", "down")  # a layer's linears, in the order FastLlama keeps them


@dataclass(frozen=True, slots=True)
class LlamaShape:
    """The configuration FastLlama runs by."""

    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    eps: float
    max_len: int
    vocab: int


@dataclass(eq=False)
class LlamaWeights:
    """A Llama model as FastLlama reads it. `layers[i]`: input norm, qkv, o, post-attention norm,
    gate_up, down. `int4[name]` ("3.qkv"): (packed, scales) for torch's CPU int4 kernel; None:
    not looked for. `config`: the model's configuration (context length, KV size, and `_name_or_path`,
    the folder whose files identify the weights for KV snapshots)."""

    shape: LlamaShape
    embed: torch.Tensor
    norm: torch.Tensor
    head: torch.Tensor
    layers: list[tuple[torch.Tensor, ...]]
    inv_freq: torch.Tensor  # float32 [head_dim / 2]
    rope_scale: float
    config: Any
    int4: dict[str, tuple[torch.Tensor, torch.Tensor]] | None = field(default=None)

    @property
    def dtype(self) -> torch.dtype:
        return self.embed.dtype

    @property
    def device(self) -> torch.device:
        return self.embed.device

    def rope(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin [n, head_dim] in float32 for positions 0..n-1, computed as transformers'
        Llama rotary embedding computes them (the same operations, so the same bits)."""
        pos = torch.arange(n, device=self.device)
        freqs = pos[:, None].float() * self.inv_freq.to(device=self.device, dtype=torch.float)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos() * self.rope_scale, emb.sin() * self.rope_scale

    def find_int4(self) -> None:
        """Look for int4 packs (the slow part of packing: every weight is checked against a grid)."""
        found = {}
        for i, layer in enumerate(self.layers):
            for name, w in zip(LINEARS, (layer[1], layer[2], layer[4], layer[5])):
                packed = int4_grid(w)
                if packed is not None:
                    found[f"{i}.{name}"] = packed
        self.int4 = found


def int4_grid(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """If every group of 32 weights along K already lies on a 16-level grid (weights that were
    4-bit quantised, like the default model's Q4_1 blocks, held in bf16), the int4 packing of it
    for torch's CPU kernel: (packed, scales_and_zeros). Else None: quantising would lose accuracy.
    Dequantised as (q - 8) * d + zero with zero = min + 8 d; the group's min and max give d and min."""
    n, k = w.shape
    if k % INT4_GROUP:
        return None
    g = w.float().view(n, k // INT4_GROUP, INT4_GROUP)
    lo, hi = g.amin(-1), g.amax(-1)
    d = ((hi - lo) / 15).clamp(min=1e-10)
    q = torch.round((g - lo[..., None]) / d[..., None]).clamp(0, 15)
    if float(((q * d[..., None] + lo[..., None] - g).abs().amax(-1) / d).max()) > 0.1:  # bf16 rounding: ≤ 0.04
        return None
    scales = torch.stack([d, lo + 8 * d], -1).transpose(0, 1).contiguous().to(torch.bfloat16)
    return torch._convert_weight_to_int4pack_for_cpu(q.to(torch.int32).view(n, k), 2), scales


def from_model(model: Any) -> LlamaWeights:
    """The weights of a transformers Llama model. The fused q/k/v and gate/up weights are new
    tensors and the modules' own weights become views of them (no second copy)."""
    cfg = model.config
    inner = model.model
    layers = []
    for layer in inner.layers:
        a, m = layer.self_attn, layer.mlp
        layers.append((layer.input_layernorm.weight.detach(), _fuse([a.q_proj, a.k_proj, a.v_proj]),
                       a.o_proj.weight.detach(), layer.post_attention_layernorm.weight.detach(),
                       _fuse([m.gate_proj, m.up_proj]), m.down_proj.weight.detach()))
    heads = cfg.num_attention_heads
    shape = LlamaShape(cfg.num_hidden_layers, heads, cfg.num_key_value_heads,
                       getattr(cfg, "head_dim", None) or cfg.hidden_size // heads, float(cfg.rms_norm_eps),
                       int(getattr(cfg, "max_position_embeddings", 1 << 20)), int(cfg.vocab_size))
    rotary = inner.rotary_emb
    return LlamaWeights(shape, inner.embed_tokens.weight.detach(), inner.norm.weight.detach(),
                        model.lm_head.weight.detach(), layers, rotary.inv_freq.detach().float().cpu(),
                        float(rotary.attention_scaling), cfg)


def _fuse(modules: list[Any]) -> torch.Tensor:
    if len(modules) == 1:
        return modules[0].weight.detach()
    fused = torch.cat([m.weight.detach() for m in modules])
    start = 0
    for m in modules:
        rows = m.weight.shape[0]
        m.weight.data = fused[start : start + rows]
        start += rows
    return fused


# ---------------------------------------------------------------------- the file


def save(weights: LlamaWeights, path: Path, source: str) -> None:
    """Write `weights` to `path` (atomically: a temp file renamed into place). `source` names the
    files they came from (see `identity`); `read` refuses the file once that changes."""
    from safetensors.torch import save_file

    tensors = {"embed": weights.embed, "norm": weights.norm, "inv_freq": weights.inv_freq}
    tied = weights.head.data_ptr() == weights.embed.data_ptr()
    if not tied:
        tensors["head"] = weights.head
    for i, layer in enumerate(weights.layers):
        for name, t in zip(("ln1", *LINEARS[:2], "ln2", *LINEARS[2:]), layer):
            tensors[f"{i}.{name}"] = t
    for name, (packed, scales) in (weights.int4 or {}).items():
        tensors[f"int4.{name}.packed"], tensors[f"int4.{name}.scales"] = packed, scales
    meta = {"format": FORMAT, "torch": torch.__version__, "source": source, "tied": tied,
            "int4": weights.int4 is not None, "rope_scale": weights.rope_scale,
            "shape": _fields(weights.shape)}
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        save_file({k: t.contiguous().cpu() for k, t in tensors.items()}, tmp, metadata={"omnidesk": json.dumps(meta)})
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def read(path: Path, source: str, config: Any, device: str = "cpu") -> LlamaWeights | None:
    """The weights in `path` (mapped, and every page touched once here, so the first reply's
    forward does not wait for them), or None when there is no such file or it is not for these
    weights (another `source`, another torch, an older layout, damaged): the caller then builds
    them again."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    try:
        with safe_open(str(path), "pt") as f:
            meta = json.loads((f.metadata() or {}).get("omnidesk", "{}"))
        if meta.get("format") != FORMAT or meta.get("source") != source or meta.get("torch") != torch.__version__:
            return None
        tensors = load_file(str(path), device=device)
        for t in tensors.values():
            _touch(t)
        shape = LlamaShape(**meta["shape"])
        layers = [tuple(tensors[f"{i}.{n}"] for n in ("ln1", *LINEARS[:2], "ln2", *LINEARS[2:])) for i in range(shape.layers)]
        int4 = None
        if meta["int4"]:
            names = {k[5:].rsplit(".", 1)[0] for k in tensors if k.startswith("int4.")}
            int4 = {n: (tensors[f"int4.{n}.packed"], tensors[f"int4.{n}.scales"]) for n in names}
        embed = tensors["embed"]
        return LlamaWeights(shape, embed, tensors["norm"], embed if meta["tied"] else tensors["head"], layers,
                            tensors["inv_freq"], float(meta["rope_scale"]), config, int4)
    except FileNotFoundError:
        return None
    except Exception as exc:  # a torn or foreign file: rebuilt, never trusted
        log.warning("The packed weights in %s cannot be read (%s); packing them again.", path, exc)
        return None


def identity(files: list[Path]) -> str:
    """Names the source weight files by path, size and modification time."""
    rows = []
    for f in sorted(files):
        st = f.stat()
        rows.append(f"{f.name}|{st.st_size}|{st.st_mtime_ns}")
    return ";".join(rows)


class JsonConfig(SimpleNamespace):
    """A model's config.json as attributes, for what reads a config without transformers
    (context length, KV bytes per token, the snapshots' fingerprint)."""

    def get_text_config(self) -> "JsonConfig":
        return self


def _fields(shape: LlamaShape) -> dict:
    return {name: getattr(shape, name) for name in LlamaShape.__slots__}


PAGE = 4096


def _touch(t: torch.Tensor) -> None:
    """Read one element of every page of a mapped tensor (≈20 ms for 500 MB in the page cache)."""
    if t.device.type == "cpu" and t.numel():
        step = max(1, PAGE // t.element_size())
        float(t.reshape(-1)[::step].float().sum())
