"""The core invariant over the disk tier: random conversations, with evictions forced by few slots,
a small disk budget, restarts of the worker at random points, corrupt snapshots and snapshots of
another model planted in the folder: output with the cache equals output without it (greedy,
fp32), integrity holds after every step, and another model's snapshot is never loaded."""

from __future__ import annotations

import torch
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from worker_helpers import chat, check_integrity, request_for

from desktop.model.messages import Message
from desktop.workers.config import WorkerConfig
from desktop.workers.kv_disk import format as fmt
from desktop.workers.kv_disk.files import SnapshotDir
from desktop.workers.local import LocalClient

TEXT = st.text(alphabet=list("abcdefghij klmnop.,?!é日\n"), min_size=1, max_size=30)
LONG = "The quick brown fox jumps over the lazy dog. " * 6
MAX = 5
OPS = st.one_of(
    st.tuples(st.just("turn"), st.integers(0, 2), TEXT),
    st.tuples(st.just("regen"), st.integers(0, 2)),
    st.tuples(st.just("edit"), st.integers(0, 2), st.integers(0, 9), TEXT),
    st.tuples(st.just("long"), st.integers(0, 2)),
    st.tuples(st.just("restart"), st.booleans()),  # True: a clean Shutdown (spill all); False: the process died
    st.tuples(st.just("corrupt"), st.integers(0, 99)),
    st.tuples(st.just("foreign"), st.integers(0, 99)),
)


def plant_foreign(path) -> None:
    """Rewrite a snapshot as another model's: other K/V (what would change the output), a valid
    checksum, another fingerprint."""
    try:
        header, tensors = fmt.read(path)
    except fmt.SnapshotError:  # corrupted by an earlier op
        return
    fmt.write(path, {k: -t + 0.5 for k, t in tensors.items()}, "another-model", header.state, header.runner)


def flip(path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x55
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("runner", ["hf", "static"])
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(num_slots=st.integers(1, 2), budget=st.sampled_from([30_000, 120_000, 1 << 30]), ops=st.lists(OPS, min_size=1, max_size=10))
def test_cached_equals_uncached_across_disk_and_restarts(tiny_lm, oracle, tmp_path_factory, runner, num_slots, budget, ops):
    folder = tmp_path_factory.mktemp("kv")
    config = WorkerConfig(num_slots=num_slots, cache_min_tokens=8, prefill_chunk=16, prefill_budget=24, runner=runner,
                          kv_dir=str(folder), kv_disk_budget_bytes=budget)
    client = LocalClient(tiny_lm, config, on_step=check_integrity)
    convs: list[list[Message]] = [[Message("system", "You are a helpful assistant.")], [], []]
    for n, op in enumerate(ops):
        client.worker.writer.flush(30)
        entries = SnapshotDir(folder).entries()
        assert len(entries) <= 1 or sum(e.size for e in entries) <= budget
        if op[0] == "restart":
            if op[1]:
                client.worker.close()
            client = LocalClient(tiny_lm, config, on_step=check_integrity)
            mine = client.worker.disk.fingerprint
            assert all(fmt.read_header(e.path).fingerprint == mine for e in SnapshotDir(folder).entries())
            continue
        if op[0] in ("corrupt", "foreign"):
            if entries:
                path = entries[op[1] % len(entries)].path
                plant_foreign(path) if op[0] == "foreign" else flip(path)
            continue
        conv = convs[op[1]]
        msgs = request_for(op, conv, long_text=LONG)
        done = chat(client, f"r{n}", msgs, MAX)
        assert list(done.token_ids) == oracle.chat(msgs, MAX), (op, done.stats)
        conv.append(Message("assistant", done.text))
    client.worker.close()
