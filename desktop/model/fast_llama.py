"""FastLlama: a hand-written forward for Llama-family models over a KVPool (model/kv_pool.py).

It runs the weights of a transformers Llama model in their final layout (model/llama_weights.py:
taken from the model, or mapped from the file written the first time) and runs one forward for B consecutive pool rows at once: `tok`/`pos` [B, T] are written
into the rows' K/V at their positions and attention reads each row's first L positions with the
mask kpos <= pos, so rows of different lengths need no padding and a crop is only a length.
What makes it faster than the transformers forward on CPU (docs/research/cpu-decode-probe.md):
no cache objects or mask builders per step, bf16 linears prepacked for oneDNN (q/k/v and
gate/up fused), the query heads of a KV head folded into query rows of one matmul. In float32
it computes what transformers computes (the runner's equivalence tests hold it to that)."""

from __future__ import annotations

import logging
from typing import Any, Callable

import torch
import torch.nn.functional as F

from desktop.model.kv_pool import KVPool
from desktop.model.llama_weights import INT4_GROUP, LlamaWeights, from_model, int4_grid

__all__ = ["FastLlama", "INT4_GROUP", "Linear", "can_pack", "int4_grid", "supported"]

log = logging.getLogger(__name__)
ROPE_TYPES = ("default", "linear", "llama3")  # position tables that do not depend on the sequence


def supported(model: Any) -> str | None:
    """None if FastLlama can run `model`, else why not (the runner then falls back to transformers)."""
    if isinstance(model, LlamaWeights):
        return None
    cfg = getattr(model, "config", None)
    if getattr(cfg, "model_type", None) != "llama":
        return f"architecture {getattr(cfg, 'model_type', '?')!r} is not Llama"
    if getattr(cfg, "attention_bias", False) or getattr(cfg, "mlp_bias", False):
        return "biased projections"
    if getattr(cfg, "hidden_act", "silu") != "silu":
        return f"activation {cfg.hidden_act!r}"
    rope = getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None) or {}
    kind = rope.get("rope_type", rope.get("type", "default")) if isinstance(rope, dict) else "default"
    if kind not in ROPE_TYPES:
        return f"rope type {kind!r}"
    if not hasattr(getattr(model, "model", None), "rotary_emb"):
        return "no rotary embedding module"
    return None


def can_pack(dtype: torch.dtype, device: torch.device) -> bool:
    """oneDNN-prepacked bf16 linears: on CPUs where oneDNN runs bf16 (2× faster than F.linear)."""
    if device.type != "cpu" or dtype != torch.bfloat16 or not torch.backends.mkldnn.is_available():
        return False
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


INT4_MAX_ROWS = 4  # the CPU int4 kernel's cost grows with rows: from ~6 rows packed bf16 is faster


class Linear:
    """y = x @ W.T for one weight (q/k/v and gate/up come fused, llama_weights.py). On a CPU with
    bf16 it also keeps faster forms: `int4` (its packs, when the weights are on a 4-bit grid; used
    up to INT4_MAX_ROWS rows), and a oneDNN-prepacked copy when int4 is out or batches may be wider."""

    def __init__(self, weight: torch.Tensor, fast: bool, batch_hint: int,
                 int4: tuple[torch.Tensor, torch.Tensor] | None = None) -> None:
        self.weight = weight
        self.out = int(weight.shape[0])
        self.int4 = int4 if fast else None
        wide = self.int4 is None or batch_hint > INT4_MAX_ROWS  # decode batches int4 is slow at
        self.packed = torch.ops.mkldnn._reorder_linear_weight(weight, batch_hint) if fast and wide else None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        x2 = x.reshape(-1, x.shape[-1])
        if self.int4 is not None and x2.shape[0] <= INT4_MAX_ROWS:
            y = torch._weight_int4pack_mm_for_cpu(x2, self.int4[0], INT4_GROUP, self.int4[1])
        elif self.packed is not None:
            y = torch.ops.mkldnn._linear_pointwise(x2, self.packed, None, "none", [], "")
        else:
            y = F.linear(x2, self.weight)
        return y.view(*lead, self.out)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    return weight * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


MATMUL_DECODE_FROM = 16384  # attended positions from which a GPU decode step uses matmul attention
MATMUL_DECODE_ROWS = 8  # ... when it has at most this many rows


def matmul_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """softmax(q k^T / sqrt(d) + bias) v with the softmax in float32: reads K and V once with
    well-parallelised matmuls, which beats the fused kernels for a few query rows over many keys."""
    scores = torch.matmul(q, k.transpose(-1, -2)) * (q.shape[-1] ** -0.5) + bias
    return torch.matmul(torch.softmax(scores.float(), -1).to(v.dtype), v)


class FastLlama:
    on_layer: Callable[[], None] | None = None  # called after each decoder layer (heartbeats)

    def __init__(self, model: Any, fast: bool | None = None, batch_hint: int = 1) -> None:
        """`model`: a transformers Llama model or its LlamaWeights (read from the packed file)."""
        why = supported(model)
        if why:
            raise ValueError(f"FastLlama cannot run this model: {why}")
        w = model if isinstance(model, LlamaWeights) else from_model(model)
        self.weights = w
        self.dtype, self.device = w.dtype, w.device
        self.fast = can_pack(self.dtype, self.device) if fast is None else fast
        if self.fast and w.int4 is None:  # not read from a packed file: look for int4 weights now
            w.find_int4()
        s = w.shape
        self.layers_n, self.heads, self.kv_heads, self.head_dim = s.layers, s.heads, s.kv_heads, s.head_dim
        self.eps, self.max_len, self.vocab = s.eps, s.max_len, s.vocab
        self.embed, self.norm = w.embed, w.norm
        self.head = Linear(w.head, self.fast, batch_hint)  # never int4: an int4 head costs accuracy
        int4 = w.int4 or {}
        self.layers = []
        for i, (ln1, qkv, o, ln2, gate_up, down) in enumerate(w.layers):
            self.layers.append((ln1, *(Linear(t, self.fast, batch_hint, int4.get(f"{i}.{n}")) for n, t in (("qkv", qkv), ("o", o))),
                                ln2, *(Linear(t, self.fast, batch_hint, int4.get(f"{i}.{n}")) for n, t in (("gate_up", gate_up), ("down", down)))))
        self.cos = self.sin = torch.empty(0)
        self.kpos = torch.empty(0, dtype=torch.long)
        # A prefill (one row, its new tokens the last positions it attends) on a GPU: SDPA's
        # lower-right causal bias with native GQA, which flash attention runs with enough blocks
        # for a long history; the explicit mask left a 17k-token history to a kernel with 24
        # blocks (issue 25). Off on CPUs, where the mask path measured as fast; off for good if
        # no kernel takes it here.
        self.causal_prefill = self.device.type == "cuda"
        self._lower_right = _causal_bias() if self.causal_prefill else None
        # A decode step of few rows over a long pool on a GPU: SDPA's masked kernels ran 0.71 ms
        # a layer at 32k positions where two matmuls and a softmax take 0.14 (8B heads, H100;
        # bench/attention_gpu.py); from 32 rows on, SDPA is faster again. None: never.
        self.matmul_decode = (MATMUL_DECODE_FROM, MATMUL_DECODE_ROWS) if self.device.type == "cuda" else None

    def new_pool(self, rows: int, cap: int) -> KVPool:
        return KVPool(self.layers_n, rows, self.kv_heads, self.head_dim, self.dtype, self.device,
                      cap=cap, max_len=self.max_len)

    def tables(self, n: int) -> None:
        """Rope tables and key positions for at least n positions (grown by doubling)."""
        if self.cos.shape[0] >= n:
            return
        n = max(n, 2 * self.cos.shape[0], 256)
        cos, sin = self.weights.rope(n)
        self.cos, self.sin = cos.to(self.dtype), sin.to(self.dtype)
        self.kpos = torch.arange(n, device=self.device)

    @torch.inference_mode()
    def forward(self, pool: KVPool, row0: int, tok: torch.Tensor, pos: torch.Tensor, length: int,
                tail: bool = False) -> torch.Tensor:
        """Rows row0..row0+B-1 of the pool take tokens `tok` at positions `pos` (int64 [B, T]);
        attention reads positions [0, length) of each row (length > every pos). `tail`: one row
        whose T tokens are positions length-T..length-1 (a prefill chunk), which allows a
        causal kernel instead of a mask. Returns the float32 logits of each row's last token, [B, vocab]."""
        B, T = tok.shape
        nh, nkv, hd = self.heads, self.kv_heads, self.head_dim
        rep = nh // nkv
        self.tables(max(length, pool.cap))
        x = F.embedding(tok, self.embed)
        cos, sin = self.cos[pos].unsqueeze(2), self.sin[pos].unsqueeze(2)  # [B, T, 1, hd]
        causal = tail and B == 1 and self.causal_prefill
        bias = None if causal else self._mask(pos, length, B, T, rep)
        rows = torch.arange(row0, row0 + B, device=tok.device)[:, None]
        for i, (ln1, qkv, o_proj, ln2, gate_up, down) in enumerate(self.layers):
            qk, v = qkv(rms_norm(x, ln1, self.eps)).split([(nh + nkv) * hd, nkv * hd], -1)
            qk = qk.view(B, T, nh + nkv, hd)
            qk = qk * cos + rotate_half(qk) * sin  # q and k rotated together
            kc, vc = pool.k[i], pool.v[i]
            kc[rows, :, pos] = qk[:, :, nh:]
            vc[rows, :, pos] = v.view(B, T, nkv, hd)
            k, v = kc[row0 : row0 + B, :, :length], vc[row0 : row0 + B, :, :length]
            if causal:
                att = self._causal(qk[:, :, :nh].transpose(1, 2), k, v, T, length)
                if att is None:  # no kernel here takes it: the mask path from now on
                    causal, bias = False, self._mask(pos, length, B, T, rep)
            if not causal:
                q = qk[:, :, :nh].transpose(1, 2).reshape(B, nkv, rep * T, hd)
                attend = matmul_attention if self._matmul(B, T, length) else F.scaled_dot_product_attention
                att = attend(q, k, v, bias).reshape(B, nh, T, hd)
            x = x + o_proj(att.transpose(1, 2).reshape(B, T, nh * hd))
            g, u = gate_up(rms_norm(x, ln2, self.eps)).chunk(2, -1)
            x = x + down(F.silu(g) * u)
            if self.on_layer is not None:
                self.on_layer()
        return self.head(rms_norm(x[:, -1], self.norm, self.eps)).float()

    def _matmul(self, B: int, T: int, length: int) -> bool:
        return self.matmul_decode is not None and T == 1 and length >= self.matmul_decode[0] and B <= self.matmul_decode[1]

    def _mask(self, pos: torch.Tensor, length: int, B: int, T: int, rep: int) -> torch.Tensor:
        """Additive mask [B, 1, rep*T, length]: each row's query t sees keys at positions <= its
        own; the rep query heads of a KV head are extra query rows of that head (no K/V repeat)."""
        keep = (self.kpos[:length][None, None, :] <= pos[:, :, None])[:, None, None]
        keep = keep.expand(B, 1, rep, T, length).reshape(B, 1, rep * T, length)
        return torch.zeros(keep.shape, dtype=self.dtype, device=self.device).masked_fill_(~keep, float("-inf"))

    def _causal(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, T: int, length: int) -> torch.Tensor | None:
        """Attention of T queries at the last T of `length` positions, GQA native: [1, nh, T, hd]."""
        try:
            bias = self._lower_right or _causal_bias()
            return F.scaled_dot_product_attention(q, k, v, attn_mask=bias(T, length), enable_gqa=True)
        except (RuntimeError, NotImplementedError) as exc:
            log.warning("Causal prefill attention is not available here (%s); using the masked path.", exc)
            self.causal_prefill = False
            return None


def _causal_bias() -> Callable[[int, int], Any]:
    """torch's lower-right causal bias, imported only where it is used (a GPU's prefill): its
    module imports torch._dynamo, which took longer than the rest of a CPU start (2-6 s on 2 cores)."""
    from torch.nn.attention.bias import causal_lower_right

    return causal_lower_right
