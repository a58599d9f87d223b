"""GGUF files of a random-init Llama, written with the `gguf` package's writer: the tiny test
model's shape with its tokenizer, or real shapes (1B) with the embedded model's tokenizer. No
download; tests and bench/gguf_figures.py write what they need.

Quantisers: gguf-py's own (F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0); gguf-py cannot quantise
K-quants, so Q4_K_M, Q5_K_M and Q6_K go through ggml's `ggml_quantize_chunk`, exported by the
xllamacpp wheel's library (ctypes), with llama.cpp's own mix of types per tensor."""

from __future__ import annotations

import ctypes
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as Q, GGUFReader, GGUFWriter, LlamaFileType, quants

K_QUANTS = {"Q4_K_M": (Q.Q4_K, Q.Q6_K, LlamaFileType.MOSTLY_Q4_K_M),
            "Q5_K_M": (Q.Q5_K, Q.Q6_K, LlamaFileType.MOSTLY_Q5_K_M),
            "Q6_K": (Q.Q6_K, Q.Q6_K, LlamaFileType.MOSTLY_Q6_K)}
PLAIN = {"F32": LlamaFileType.ALL_F32, "F16": LlamaFileType.MOSTLY_F16, "BF16": LlamaFileType.MOSTLY_BF16,
         "Q4_0": LlamaFileType.MOSTLY_Q4_0, "Q4_1": LlamaFileType.MOSTLY_Q4_1, "Q8_0": LlamaFileType.MOSTLY_Q8_0}


@dataclass(frozen=True, slots=True)
class Shape:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    ffn: int
    ctx: int = 2048

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


TINY = Shape(hidden=32, layers=2, heads=4, kv_heads=2, ffn=64, ctx=2048)  # desktop/model/tiny.py's shape
ONE_B = Shape(hidden=2048, layers=16, heads=32, kv_heads=8, ffn=8192, ctx=4096)  # Llama 3.2 1B's shape


@dataclass(frozen=True, slots=True)
class Vocab:
    """A GPT-2 style byte-level BPE vocabulary as GGUF stores it."""

    tokens: list[str]
    types: list[int]
    merges: list[str]
    pre: str
    eos: int
    bos: int
    pad: int
    template: str


def tiny_vocab() -> Vocab:
    """The tiny test tokenizer (desktop/model/tiny.py) with its ChatML template."""
    from desktop.model.tiny import CHATML_TEMPLATE, SPECIAL, _tokenizer_json

    model = json.loads(_tokenizer_json())["model"]
    tokens = [t for t, _ in sorted(model["vocab"].items(), key=lambda kv: kv[1])]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    types = [3 if t in SPECIAL else 1 for t in tokens]
    return Vocab(tokens, types, merges, "gpt-2", eos=tokens.index("<|im_end|>"), bos=tokens.index("<|im_start|>"),
                 pad=tokens.index("<|endoftext|>"), template=CHATML_TEMPLATE)


def embedded_vocab() -> Vocab:
    """The embedded SmolLM2's tokenizer (49,152 tokens) and chat template, read from its GGUF."""
    from desktop.model.default_model import embedded_default_gguf

    f = GGUFReader(str(embedded_default_gguf())).fields
    get = lambda k: f[k].contents()  # noqa: E731
    return Vocab(get("tokenizer.ggml.tokens"), get("tokenizer.ggml.token_type"), get("tokenizer.ggml.merges"),
                 get("tokenizer.ggml.pre"), get("tokenizer.ggml.eos_token_id"), get("tokenizer.ggml.bos_token_id"),
                 get("tokenizer.ggml.padding_token_id"), get("tokenizer.chat_template"))


def _ggml() -> ctypes.CDLL:
    import xllamacpp

    lib = ctypes.CDLL(str(next(Path(xllamacpp.__file__).parent.glob("xllamacpp*.so"))))
    lib.ggml_quantize_chunk.restype = ctypes.c_size_t
    lib.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                        ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    lib.ggml_row_size.restype = ctypes.c_size_t
    lib.ggml_row_size.argtypes = [ctypes.c_int, ctypes.c_int64]
    return lib


def quantize(w: np.ndarray, qtype: Q, lib: ctypes.CDLL | None = None) -> np.ndarray:
    """[rows, cols] float32 → the GGUF bytes of `qtype`, [rows, bytes per row] (float arrays for F32/F16)."""
    if qtype is Q.F32:
        return w
    if qtype is Q.F16:
        return w.astype(np.float16)
    if qtype in (Q.Q4_K, Q.Q5_K, Q.Q6_K):
        lib = lib or _ggml()
        rows, cols = w.shape
        w = np.ascontiguousarray(w, dtype=np.float32)
        out = np.empty((rows, lib.ggml_row_size(int(qtype), cols)), dtype=np.uint8)
        lib.ggml_quantize_chunk(int(qtype), w.ctypes.data, out.ctypes.data, 0, rows, cols, None)
        return out
    return quants.quantize(w, qtype)


def _more_bits(i: int, n: int) -> bool:
    """llama.cpp's rule for the layers whose attn_v / ffn_down get more bits in *_K_M files."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def tensor_type(name: str, layer: int, layers: int, quant: str) -> Q:
    """The type llama.cpp's quantize gives a 2-D weight of a `quant` file (norms stay F32)."""
    if quant in PLAIN:
        return Q[quant]
    base, more, _ = K_QUANTS[quant]
    if name == "token_embd":  # tied: also the output layer
        return Q.Q6_K
    if name in ("attn_v", "ffn_down") and _more_bits(layer, layers):
        return more
    return base


def write_llama(path: Path | str, quant: str, shape: Shape = TINY, vocab: Vocab | None = None, *,
                seed: int = 0, std: float = 0.02) -> Path:
    """A Llama GGUF of `shape` (tied embeddings) with random weights, quantised as `quant` (a key of
    PLAIN or K_QUANTS). Writes tensor by tensor: memory stays near one tensor's size."""
    path, vocab = Path(path), vocab or tiny_vocab()
    ftype = PLAIN[quant] if quant in PLAIN else K_QUANTS[quant][2]
    rng = np.random.default_rng(seed)
    lib = _ggml() if quant in K_QUANTS else None
    w = GGUFWriter(str(path), "llama")
    w.add_name(f"random-llama-{shape.hidden}x{shape.layers}-{quant}")
    w.add_context_length(shape.ctx)
    w.add_embedding_length(shape.hidden)
    w.add_block_count(shape.layers)
    w.add_feed_forward_length(shape.ffn)
    w.add_head_count(shape.heads)
    w.add_head_count_kv(shape.kv_heads)
    w.add_rope_dimension_count(shape.head_dim)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(len(vocab.tokens))
    w.add_file_type(int(ftype))
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(vocab.pre)
    w.add_token_list(vocab.tokens)
    w.add_token_types(vocab.types)
    w.add_token_merges(vocab.merges)
    w.add_bos_token_id(vocab.bos)
    w.add_eos_token_id(vocab.eos)
    w.add_pad_token_id(vocab.pad)
    w.add_add_bos_token(False)
    w.add_chat_template(vocab.template)
    kv = shape.kv_heads * shape.head_dim
    plan: list[tuple[str, tuple[int, ...], Q | None]] = [("token_embd.weight", (len(vocab.tokens), shape.hidden),
                                                           tensor_type("token_embd", 0, shape.layers, quant))]
    for i in range(shape.layers):
        blk = f"blk.{i}."
        plan.append((blk + "attn_norm.weight", (shape.hidden,), None))
        for name, dims in (("attn_q", (shape.hidden, shape.hidden)), ("attn_k", (kv, shape.hidden)),
                           ("attn_v", (kv, shape.hidden)), ("attn_output", (shape.hidden, shape.hidden))):
            plan.append((blk + name + ".weight", dims, tensor_type(name, i, shape.layers, quant)))
        plan.append((blk + "ffn_norm.weight", (shape.hidden,), None))
        for name, dims in (("ffn_gate", (shape.ffn, shape.hidden)), ("ffn_up", (shape.ffn, shape.hidden)),
                           ("ffn_down", (shape.hidden, shape.ffn))):
            plan.append((blk + name + ".weight", dims, tensor_type(name, i, shape.layers, quant)))
    plan.append(("output_norm.weight", (shape.hidden,), None))

    def data(dims: tuple[int, ...], qtype: Q | None) -> np.ndarray:
        if qtype is None:  # RMSNorm scales start at one
            return np.ones(dims, dtype=np.float32)
        return quantize(rng.standard_normal(dims, dtype=np.float32) * std, qtype, lib)

    for name, dims, qtype in plan:  # tensor infos first (the header needs their sizes) ...
        nbytes = _nbytes(dims, qtype)
        raw = None if qtype in (None, Q.F32, Q.F16) else qtype
        dtype = np.float16 if qtype is Q.F16 else np.float32 if raw is None else np.uint8
        w.add_tensor_info(name, dims if raw is None else _byte_shape(dims, qtype), np.dtype(dtype), nbytes, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for name, dims, qtype in plan:  # ... then the data, one tensor at a time
        w.write_tensor_data(data(dims, qtype))
    w.close()
    return path


def _byte_shape(dims: tuple[int, ...], qtype: Q) -> tuple[int, ...]:
    block, size = quants.GGML_QUANT_SIZES[qtype]
    return (*dims[:-1], dims[-1] // block * size)


def _nbytes(dims: tuple[int, ...], qtype: Q | None) -> int:
    if qtype is None or qtype is Q.F32:
        return int(np.prod(dims)) * 4
    return int(np.prod(_byte_shape(dims, qtype)))
