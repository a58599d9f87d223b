"""The packed weights file (model/llama_weights.py): what a later start maps instead of loading the
transformers model. Read back, it runs the same bits as the model it was packed from; a stale,
foreign or torn file is refused; and a worker over it keeps the cache invariant (cached output
== the uncached transformers oracle, greedy fp32) over random conversations."""

from __future__ import annotations

import dataclasses

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from worker_helpers import chat, make_client

from desktop.model import llama_weights
from desktop.model.fast_llama import FastLlama, int4_grid
from desktop.model.llama_weights import JsonConfig, from_model
from desktop.model.messages import Message


def packed(tiny_lm, tmp_path, source: str = "src") -> llama_weights.LlamaWeights:
    path = tmp_path / "llama.safetensors"
    if not path.exists():
        llama_weights.save(from_model(tiny_lm.model), path, source)
    weights = llama_weights.read(path, source, tiny_lm.model.config)
    assert weights is not None
    return weights


def run(net: FastLlama, ids: list[int]) -> list[torch.Tensor]:
    """A chunked prefill, then two decode steps: the logits of each."""
    pool = net.new_pool(2, 256)
    out = [net.forward(pool, 1, torch.tensor([ids[:9]]), torch.arange(9)[None], 9, tail=True)]
    out.append(net.forward(pool, 1, torch.tensor([ids[9:]]), torch.arange(9, len(ids))[None], len(ids), tail=True))
    for k in range(2):
        n = len(ids) + k
        out.append(net.forward(pool, 1, torch.tensor([[ids[k]]]), torch.tensor([[n]]), n + 1))
    return out


def test_read_back_runs_the_same_bits(tiny_lm, tmp_path):
    weights = packed(tiny_lm, tmp_path)
    assert weights.head is weights.embed or not tiny_lm.model.config.tie_word_embeddings
    ids = [(13 * i) % 300 + 3 for i in range(21)]
    for a, b in zip(run(FastLlama(weights), ids), run(FastLlama(tiny_lm.model), ids), strict=True):
        assert torch.equal(a, b)


def test_rope_tables_are_transformers_bits(tiny_lm, tmp_path):
    weights = packed(tiny_lm, tmp_path)
    pos = torch.arange(300)
    cos, sin = tiny_lm.model.model.rotary_emb(torch.zeros(1), pos[None])
    mine = weights.rope(300)
    assert torch.equal(mine[0], cos[0]) and torch.equal(mine[1], sin[0])


def test_stale_foreign_or_torn_files_are_refused(tiny_lm, tmp_path, caplog):
    packed(tiny_lm, tmp_path)
    path = tmp_path / "llama.safetensors"
    assert llama_weights.read(path, "other source", None) is None  # the folder's weights changed
    assert llama_weights.read(tmp_path / "none.safetensors", "src", None) is None
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # a start killed mid-write (the rename makes it rare)
    assert llama_weights.read(path, "src", None) is None
    assert "cannot be read" in caplog.text
    path.write_bytes(b"not a safetensors file")
    assert llama_weights.read(path, "src", None) is None


def test_int4_packs_travel_with_the_file(tiny_lm, tmp_path):
    """Packs found once (the slow part of a bf16 start) are read back as they were written."""
    weights = from_model(tiny_lm.model)
    n, k = weights.layers[0][1].shape
    q = torch.randint(0, 16, (n, k))
    q[:, ::32], q[:, 1::32] = 0, 15  # every group of 32 spans the whole grid
    weights.int4 = {"0.qkv": int4_grid((q * 2.0**-6 - 2.0**-3).to(torch.bfloat16))}  # on a 4-bit grid
    assert weights.int4["0.qkv"] is not None
    path = tmp_path / "llama-int4.safetensors"
    llama_weights.save(weights, path, "src")
    back = llama_weights.read(path, "src", None)
    assert set(back.int4) == {"0.qkv"}
    assert all(torch.equal(a, b) for a, b in zip(back.int4["0.qkv"], weights.int4["0.qkv"]))
    assert llama_weights.read(tmp_path / "llama-int4.safetensors", "src", None).int4 is not None


def test_json_config_reads_like_a_transformers_config():
    cfg = JsonConfig(**{"max_position_embeddings": 8192, "_name_or_path": "/x"})
    assert cfg.get_text_config() is cfg and cfg.max_position_embeddings == 8192


TEXT = st.text(alphabet=list("abcdefghij klmnop.,?!é日本\n"), min_size=1, max_size=30)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(turns=st.lists(st.tuples(TEXT, st.booleans()), min_size=1, max_size=5), num_slots=st.integers(1, 2))
def test_worker_over_packed_weights_equals_uncached(tiny_lm, oracle, tmp_path_factory, turns, num_slots):
    """A worker whose model is the packed file (as a later start loads it): every reply equals the
    uncached transformers oracle, across turns that reuse, edit and branch the cached KV."""
    lm = dataclasses.replace(tiny_lm, model=packed(tiny_lm, tmp_path_factory.mktemp("packed")))
    client = make_client(lm, num_slots=num_slots, cache_min_tokens=8, prefill_chunk=16, prefill_budget=24, runner="static")
    conv = [Message("system", "You are a helpful assistant.")]
    for n, (text, edit) in enumerate(turns):
        if edit and len(conv) > 2:
            conv = conv[:-2]  # the last exchange edited away: a prefix of the cached KV is reused
        msgs = conv + [Message("user", text)]
        done = chat(client, f"r{n}", msgs, 5)
        assert list(done.token_ids) == oracle.chat(msgs, 5)
        conv = msgs + [Message("assistant", done.text)]
