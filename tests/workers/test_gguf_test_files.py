"""The GGUF files tests and benchmarks write (tests/support/gguf_files.py): every quantisation the
issue names is written with the types llama.cpp's own quantize would give each tensor, reads back
with its facts, and a K-quant file is served by the app's llama.cpp worker."""

from __future__ import annotations

import httpx
import pytest
from gguf import GGMLQuantizationType as Q, GGUFReader
from gguf_files import Shape, embedded_vocab, tiny_vocab, write_llama

from desktop.model.gguf_facts import read_facts
from desktop.workers.remote.llama_server import LlamaServer

pytest.importorskip("xllamacpp")
SMALL = Shape(hidden=256, layers=8, heads=4, kv_heads=2, ffn=512, ctx=1024)  # K-quants need rows of 256


@pytest.mark.parametrize("quant", ["F16", "BF16", "Q4_0", "Q4_1", "Q8_0", "Q4_K_M", "Q5_K_M", "Q6_K"])
def test_each_quantisation_is_written_with_llamacpps_types(tmp_path, quant):
    path = write_llama(tmp_path / f"m-{quant}.gguf", quant, SMALL)
    facts = read_facts(path)
    assert (facts.file_type, facts.layers, facts.kv_heads, facts.head_dim) == (quant, 8, 2, 64)
    types = {t.name: t.tensor_type for t in GGUFReader(str(path)).tensors}
    assert types["blk.0.attn_norm.weight"] == Q.F32
    if quant in ("Q4_K_M", "Q5_K_M"):
        base = Q.Q4_K if quant == "Q4_K_M" else Q.Q5_K
        assert types["token_embd.weight"] == Q.Q6_K  # tied: the output layer too
        assert types["blk.0.attn_v.weight"] == Q.Q6_K and types["blk.7.ffn_down.weight"] == Q.Q6_K  # first/last 1/8
        assert types["blk.1.attn_v.weight"] == base and types["blk.3.ffn_down.weight"] == Q.Q6_K  # (3 - 1) % 3 == 2
        assert types["blk.0.attn_q.weight"] == base and types["blk.4.ffn_up.weight"] == base
    else:
        assert types["blk.0.attn_q.weight"] == Q[quant] and types["token_embd.weight"] == Q[quant]


def test_a_k_quant_file_is_served_by_llamacpp(tmp_path):
    path = write_llama(tmp_path / "m-Q4_K_M.gguf", "Q4_K_M", SMALL, tiny_vocab())
    with LlamaServer(str(path), slots=1, threads=1, pool=512, lean=True) as server:
        body = {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 3, "ignore_eos": True}
        reply = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=60).json()
    assert reply["usage"]["completion_tokens"] == 3


@pytest.mark.real_model
def test_the_embedded_tokenizer_travels_with_a_written_file(tmp_path):
    vocab = embedded_vocab()
    assert len(vocab.tokens) == 49152 and "<|im_start|>" in vocab.template
