"""The static runner's own parts: FastLlama against transformers, the KV pool's row operations,
padded fixed-shape steps (the CPU twin of CUDA graphs), int4 detection and the runner choice.
The end-to-end equivalence (cached == uncached through a worker) is in test_cache_invariant."""

from __future__ import annotations

import types

import pytest
import torch

from desktop.errors import InvalidRequest
from desktop.model import fast_llama
from desktop.model.fast_llama import FastLlama, int4_grid
from desktop.model.kv_pool import KVPool
from desktop.model.kv_shape import pool_cap
from desktop.model.params import SamplingParams
from desktop.workers.config import WorkerConfig
from desktop.workers.runner import make_runner
from desktop.workers.runner.base import DecodeRow
from desktop.workers.runner.hf import HFRunner
from desktop.workers.runner.static import StaticRunner
from desktop.workers.runner.steps import BucketedSteps, batch_buckets


def hf_logits(lm, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return lm.model(input_ids=torch.tensor([ids])).logits[0].float()


def test_fast_llama_equals_transformers_fp32(tiny_lm):
    """Chunked prefill and decode in two rows of different lengths: every logit within 1e-4."""
    net = FastLlama(tiny_lm.model)
    pool = net.new_pool(3, 256)
    gen = torch.Generator().manual_seed(1)
    a = torch.randint(0, net.vocab, (30,), generator=gen).tolist()
    b = torch.randint(0, net.vocab, (11,), generator=gen).tolist()
    got_a = net.forward(pool, 1, torch.tensor([a[:17]]), torch.arange(17)[None], 17)
    net.forward(pool, 1, torch.tensor([a[17:29]]), torch.arange(17, 29)[None], 29)
    net.forward(pool, 2, torch.tensor([b[:10]]), torch.arange(10)[None], 10)
    assert (got_a[0] - hf_logits(tiny_lm, a[:17])[-1]).abs().max() < 1e-4
    # one decode step for rows 1 and 2 together: positions 29 and 10
    step = net.forward(pool, 1, torch.tensor([[a[29]], [b[10]]]), torch.tensor([[29], [10]]), 30)
    assert (step[0] - hf_logits(tiny_lm, a)[-1]).abs().max() < 1e-4
    assert (step[1] - hf_logits(tiny_lm, b)[-1]).abs().max() < 1e-4


def test_pool_rows_copy_swap_grow_export(tiny_lm):
    pool = KVPool(2, 3, 2, 4, torch.float32, "cpu", cap=8)
    for i, t in enumerate(pool.k + pool.v):
        t.copy_(torch.randn(t.shape))
    before = pool.export(0, 5), pool.export(1, 7)
    pool.reshape(3, 32, [(0, 0, 5), (1, 1, 7)])  # grows to 32: kept rows keep what they held
    assert pool.cap == 32 and pool.generation == 2 and pool.nbytes == 2 * 2 * 3 * 2 * 32 * 4 * 4
    assert all(torch.equal(x, y) for x, y in zip(pool.export(0, 5).k, before[0].k))
    pool.swap(0, 1, 7)
    assert all(torch.equal(x, y) for x, y in zip(pool.export(1, 5).v, before[0].v))
    assert all(torch.equal(x, y) for x, y in zip(pool.export(0, 7).k, before[1].k))
    pool.copy(0, 2, 7)
    assert all(torch.equal(x, y) for x, y in zip(pool.export(2, 7).k, before[1].k))
    n = pool.load(before[0], 1)
    assert n == 5 and before[0].nbytes == 2 * 2 * 2 * 5 * 4 * 4
    assert pool_cap(12, 12) == 13  # a whole context: the cap stops at context + scratch, not the next power of two


def greedy_rows(runner, slots, tokens, steps: int) -> list[list[int]]:
    sampler = runner.sampler(SamplingParams(max_tokens=steps))
    out = [[t] for t in tokens]
    for _ in range(steps):
        got = runner.decode([DecodeRow(s, o[-1], sampler) for s, o in zip(slots, out)])
        for o, t in zip(out, got):
            o.append(t)
    return out


def test_padded_steps_leave_other_rows_alone(tiny_lm):
    """Bucketed steps pad 3 decoding rows to 4: the padded row belongs to a slot holding a cached
    conversation, which must come out unchanged (padding writes only the scratch column), and the
    decoded tokens equal the exact-shape runner's."""
    bucketed = StaticRunner(tiny_lm.model, 5, tiny_lm.kv_bytes_per_token, steps="bucketed")
    eager = StaticRunner(tiny_lm.model, 5, tiny_lm.kv_bytes_per_token, steps="eager")
    assert isinstance(bucketed.steps, BucketedSteps) and batch_buckets(5) == [1, 2, 4, 5]
    prompts = {s: [3 + s, 9, 14, 2 * s + 5, 7][: 3 + s % 3] for s in range(5)}
    firsts = {}
    for runner in (bucketed, eager):
        sampler = runner.sampler(SamplingParams(max_tokens=4))
        firsts[runner] = {s: runner.prefill(s, p, (sampler, p)) for s, p in prompts.items()}
    slots = [2, 0, 3]  # slot 3's row comes to the front (slot 1 moves down: its row is the padded one)
    kept = {s: bucketed.export_prefix(s, bucketed.kv_len(s)) for s in (1, 4)}
    got = greedy_rows(bucketed, slots, [firsts[bucketed][s] for s in slots], 6)
    want = greedy_rows(eager, slots, [firsts[eager][s] for s in slots], 6)
    assert got == want
    for s, saved in kept.items():
        after = bucketed.export_prefix(s, bucketed.kv_len(s))
        assert all(torch.equal(x, y) for x, y in zip(saved.k + saved.v, after.k + after.v)), s
    assert [bucketed.kv_len(s) for s in range(5)] == [len(prompts[s]) + (6 if s in slots else 0) for s in range(5)]


def test_static_decode_equals_transformers_runner(tiny_lm):
    """Same slots, same steps, both runners: the same greedy tokens (fp32), through joins that swap rows."""
    runners = [StaticRunner(tiny_lm.model, 3, tiny_lm.kv_bytes_per_token), HFRunner(tiny_lm.model, 3, tiny_lm.kv_bytes_per_token)]
    results = []
    for runner in runners:
        sampler = runner.sampler(SamplingParams(max_tokens=8))
        t = {s: runner.prefill(s, [5, 6, 7 + s] * (s + 1), (sampler, [])) for s in range(3)}
        seq = greedy_rows(runner, [2], [t[2]], 3) + greedy_rows(runner, [1, 2], [t[1], 11], 3)
        runner.crop(0, 2)
        runner.copy_prefix(1, 0, 4)
        seq += greedy_rows(runner, [0, 1], [5, 9], 4)
        results.append((seq, [runner.kv_len(s) for s in range(3)]))
    assert results[0] == results[1]


def test_int4_grid_only_for_weights_already_on_a_4bit_grid():
    gen = torch.Generator().manual_seed(0)
    d = torch.rand(64, 4, 1, generator=gen) * 0.01 + 1e-3
    lo = -d * (4 + 8 * torch.rand(64, 4, 1, generator=gen))  # blocks around zero, as trained weights are
    q = torch.randint(0, 16, (64, 4, 32), generator=gen).float()
    q[..., 0], q[..., 1] = 0, 15  # each block spans its whole grid, as Q4_1 blocks do
    w = (q * d + lo).view(64, 128).to(torch.bfloat16)
    packed = int4_grid(w)
    assert packed is not None
    x = torch.randn(2, 128, generator=gen).to(torch.bfloat16)
    y = torch._weight_int4pack_mm_for_cpu(x, packed[0], 32, packed[1]).float()
    ref = torch.nn.functional.linear(x.float(), w.float())
    assert (y - ref).abs().max() < 0.02 * ref.abs().max()
    assert int4_grid(torch.randn(64, 128, generator=gen).to(torch.bfloat16)) is None


@pytest.mark.parametrize("history", [0, 7, 300])
def test_causal_prefill_equals_masked(tiny_lm, history):
    """The GPU's prefill attention (lower-right causal bias, native GQA) computes what the mask
    path computes, with and without a kept history before the chunk (run here on the CPU's kernels)."""
    net = FastLlama(tiny_lm.model)
    ids = [(7 * i) % 200 + 3 for i in range(history + 9)]
    out = []
    for causal in (False, True):
        net.causal_prefill = causal
        pool = net.new_pool(1, 512)
        if history:
            net.forward(pool, 0, torch.tensor([ids[:history]]), torch.arange(history)[None], history, tail=True)
        out.append(net.forward(pool, 0, torch.tensor([ids[history:]]), torch.arange(history, len(ids))[None], len(ids), tail=True))
        assert net.causal_prefill is causal  # the causal kernel really ran (no fallback)
    assert (out[0] - out[1]).abs().max() < 1e-4 * out[0].abs().max()


def test_matmul_decode_attention_equals_sdpa(tiny_lm):
    """The GPU's decode attention for few rows over a long pool (matmuls and a float softmax)
    computes what SDPA computes, rows of different lengths and padded columns included."""
    net = FastLlama(tiny_lm.model)
    a, b = [(5 * i) % 150 + 3 for i in range(40)], [(11 * i) % 150 + 3 for i in range(13)]
    out = []
    for matmul in (None, (1, 8)):
        net.matmul_decode = matmul
        pool = net.new_pool(2, 256)
        net.forward(pool, 0, torch.tensor([a]), torch.arange(40)[None], 40, tail=True)
        net.forward(pool, 1, torch.tensor([b]), torch.arange(13)[None], 13, tail=True)
        out.append(net.forward(pool, 0, torch.tensor([[7], [9]]), torch.tensor([[40], [13]]), 64))
    assert net._matmul(2, 1, 64) and not net._matmul(2, 2, 64)
    assert (out[0] - out[1]).abs().max() < 1e-4 * out[0].abs().max()


@pytest.mark.skipif(not fast_llama.can_pack(torch.bfloat16, torch.device("cpu")), reason="no oneDNN bf16 on this CPU")
def test_bf16_fast_path_tracks_transformers(tiny_lm):
    """bf16 with oneDNN-packed linears: not bit-equal (that is fp32's job), but close to transformers in bf16."""
    model = tiny_lm.model.to(torch.bfloat16)
    try:
        net = FastLlama(model)
        assert net.fast and net.layers[0][1].packed is not None
        ids = list(range(5, 40))
        got = net.forward(net.new_pool(1, 256), 0, torch.tensor([ids]), torch.arange(len(ids))[None], len(ids))[0]
        ref = hf_logits(types.SimpleNamespace(model=model), ids)[-1]
        assert (got - ref).abs().max() < 0.05 * ref.abs().max()
    finally:
        tiny_lm.model.to(torch.float32)


def test_runner_choice(tiny_lm):
    assert isinstance(make_runner(tiny_lm, WorkerConfig(runner="auto")), StaticRunner)
    assert isinstance(make_runner(tiny_lm, WorkerConfig(runner="hf")), HFRunner)
    assert isinstance(make_runner(tiny_lm, WorkerConfig(runner="static-bucketed")).steps, BucketedSteps)
    other = types.SimpleNamespace(model=types.SimpleNamespace(config=types.SimpleNamespace(model_type="gpt2")), name="gpt2-test")
    with pytest.raises(InvalidRequest, match="gpt2"):
        make_runner(other, WorkerConfig(runner="static"))
    with pytest.raises(InvalidRequest):
        WorkerConfig(runner="fast")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a CUDA device")
def test_cuda_graph_steps_equal_eager(tiny_lm):  # pragma: no cover - runs on a GPU machine
    model = tiny_lm.model.to("cuda")
    try:
        graphs = StaticRunner(model, 4, tiny_lm.kv_bytes_per_token, steps="graphs")
        eager = StaticRunner(model, 4, tiny_lm.kv_bytes_per_token, steps="eager")
        out = []
        for runner in (graphs, eager):
            sampler = runner.sampler(SamplingParams(max_tokens=4))
            t = [runner.prefill(s, [4, 5, 6 + s] * (s + 1), (sampler, [])) for s in range(3)]
            out.append(greedy_rows(runner, [0, 1, 2], t, 300))  # crosses a length bucket and a pool growth
        assert out[0] == out[1]
    finally:
        tiny_lm.model.to("cpu")


@pytest.mark.parametrize("room", [0, 300])
def test_import_with_room_sizes_the_row_once(tiny_lm, room):
    """A restore of 250 positions whose prompt is 300 long: with `room` the row is shaped once
    at the import, and the prefill after it runs in that row (no second reshape copying the
    restored KV again); the logits are those of a prefill from nothing either way."""
    runner = StaticRunner(tiny_lm.model, 2, tiny_lm.kv_bytes_per_token)
    ids = torch.randint(0, runner.net.vocab, (300,), generator=torch.Generator().manual_seed(3)).tolist()
    sampler = runner.sampler(SamplingParams(max_tokens=1, temperature=0.0))
    runner.prefill(0, ids[:250])
    saved = runner.export_prefix(0, 250)
    runner.clear(0)
    runner.import_prefix(saved, 1, room)
    shaped = runner.pool.generation
    got = runner.prefill(1, ids[250:], (sampler, ids))
    assert (runner.pool.generation == shaped) == (room >= 300)
    fresh = StaticRunner(tiny_lm.model, 1, tiny_lm.kv_bytes_per_token)
    assert got == fresh.prefill(0, ids, (fresh.sampler(SamplingParams(max_tokens=1, temperature=0.0)), ids))
    assert runner.kv_len(1) == 300
