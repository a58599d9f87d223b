"""The cache invariant on a CUDA device (issue 25): the worker with the static runner's captured
CUDA graphs (and its bucketed and eager twins) gives the same greedy replies with the cache as
without it, over random multi-turn conversations, fp32. Skipped without CUDA; the GPU check
(bench/gpu_check.py) runs it on the lent machine."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_cache_invariant import LONG, OPS
from worker_helpers import chat, make_client, request_for

from desktop.model.loader import ModelSpec, load_model
from desktop.model.messages import Message
from desktop.model.params import SamplingParams
from desktop.protocol import Chat

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
STEPS = pytest.mark.parametrize("steps", ["graphs", "bucketed", "eager"])


@pytest.fixture(scope="module")
def cuda_lm():
    return load_model(ModelSpec("tiny", "float32", "cuda"))


@STEPS
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(num_slots=st.integers(1, 3), ops=st.lists(OPS, min_size=1, max_size=8))
def test_cached_equals_uncached_on_cuda(cuda_lm, num_slots, ops, steps):
    runner = {"graphs": "static", "bucketed": "static-bucketed", "eager": "static"}[steps]
    common = dict(num_slots=num_slots, cache_min_tokens=8, prefill_chunk=16, prefill_budget=24, runner=runner)
    cached = make_client(cuda_lm, **common)
    plain = make_client(cuda_lm, **common, cache_mode="off")
    if steps == "eager":  # the runner's default on CUDA is graphs: force the exact-shape steps
        from desktop.workers.runner.steps import EagerSteps
        for client in (cached, plain):
            client.worker.runner.steps = EagerSteps(client.worker.runner.net)
    assert cached.worker.runner.device.type == "cuda"
    convs: list[list[Message]] = [[Message("system", "You are a helpful assistant.")], [], []]
    for n, op in enumerate(ops):
        conv = convs[op[1]]
        msgs = request_for(op, conv, long_text=LONG)
        done = chat(cached, f"r{n}", msgs, 5)
        assert list(done.token_ids) == list(chat(plain, f"u{n}", msgs, 5).token_ids), (op, done.stats)
        conv.append(Message("assistant", done.text))


def test_graph_steps_are_captured_once_and_replayed(cuda_lm):
    """A decode on CUDA goes through captured graphs: the first reply captures its (batch,
    length) shape once, the next turn of the same conversation replays it and captures nothing."""
    client = make_client(cuda_lm, num_slots=1, runner="static")
    steps = client.worker.runner.steps
    assert type(steps).__name__ == "CudaGraphSteps"
    captures, runs = [], []
    capture, run = steps._capture, steps.run
    steps._capture = lambda *a: captures.append(a[1:]) or capture(*a)
    steps.run = lambda *a: runs.append(a[1:3]) or run(*a)
    msgs = [Message("user", "hello there")]
    params = SamplingParams(max_tokens=6, ignore_eos=True)
    first = client.run(Chat("a", tuple(msgs), params))[-1]
    assert len(runs) == len(first.token_ids) - 1 >= 1 and len(captures) == 1
    second = client.run(Chat("b", (*msgs, Message("assistant", first.text), Message("user", "and again")), params))[-1]
    assert len(runs) == len(first.token_ids) + len(second.token_ids) - 2 and len(captures) == 1
