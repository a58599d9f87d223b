"""KV snapshots on disk as files of this format: a round trip through a real runner's export,
and every snapshot that must never be loaded (another model's, torn, corrupt) deleted instead."""

from __future__ import annotations

import logging

import pytest
import torch
from worker_helpers import S, U, chat, check_integrity

from desktop.workers.config import WorkerConfig
from desktop.workers.kv_disk import format as fmt
from desktop.workers.kv_disk.files import SnapshotDir
from desktop.workers.kv_disk.state import SnapState
from desktop.workers.kv_disk.store import DiskStore
from desktop.workers.local import LocalClient

RUNNERS = pytest.mark.parametrize("runner", ["hf", "static"])


def held(tiny_lm, tmp_path, runner):
    """A worker over `tmp_path` whose slot 0 holds a short conversation, its state and export."""
    client = LocalClient(tiny_lm, WorkerConfig(num_slots=2, cache_min_tokens=4, kv_dir=str(tmp_path), runner=runner),
                         on_step=check_integrity)
    chat(client, "r", [S, U("Tell me about the sea, please.")])
    worker = client.worker
    slot = next(s for s in worker.scheduler.table.slots if s.ids)
    saved = worker.runner.export_prefix(slot.index, len(slot.ids))
    return worker, SnapState.of(slot), saved


def flat(runner, saved) -> list[torch.Tensor]:
    tensors, _ = runner.pack(saved)
    return [tensors[k] for k in sorted(tensors)]


@RUNNERS
def test_a_snapshot_comes_back_as_it_was_written(tiny_lm, tmp_path, runner):
    worker, state, saved = held(tiny_lm, tmp_path, runner)
    path = worker.disk.write(state, saved)
    assert path.name == f"_--{state.key}.kvsnap"
    again = DiskStore(SnapshotDir(tmp_path), worker.disk.fingerprint, 1 << 30, worker.runner.pack, worker.runner.unpack)
    assert again.scan() == 1
    snap, k = again.find(list(state.hashes) + [b"another message"])
    assert k == len(state.hashes) and snap.state == state
    restored = again.restore(snap, len(state.ids))
    for a, b in zip(flat(worker.runner, saved), flat(worker.runner, restored), strict=True):
        assert torch.equal(a, b)
    part = again.restore(snap, 5)  # a prefix only: what an edit reuses
    assert all(t.shape == a[..., :5, :].shape for t, a in zip(flat(worker.runner, part), flat(worker.runner, saved)))


def test_state_keeps_images_by_digest_and_proves_its_hashes():
    from desktop.model.images import ImageData
    from desktop.model.messages import Message, prefix_hashes

    msgs = (S, Message("user", "look", (ImageData(b"png", bytes(range(32)), "image/png", 3, 4),)))
    state = SnapState((1, 2, 3), msgs, tuple(prefix_hashes(msgs)), (1, 2, 3), (1, 3), "c1")
    back = SnapState.from_json(state.to_json())
    assert back.hashes == state.hashes and back.ids == state.ids and back.conversation == "c1"
    with pytest.raises(ValueError):
        SnapState.from_json(state.to_json().replace('"bounds": [1, 3]', '"bounds": [1, 2]'))


@RUNNERS
def test_another_models_snapshot_is_deleted_never_loaded(tiny_lm, tmp_path, runner, caplog):
    worker, state, saved = held(tiny_lm, tmp_path, runner)
    path = worker.disk.write(state, saved)
    other = DiskStore(SnapshotDir(tmp_path), "another-model", 1 << 30, worker.runner.pack, worker.runner.unpack)
    with caplog.at_level(logging.WARNING):
        assert other.scan() == 0
    assert not path.exists() and other.find(state.hashes) is None
    assert sum("another model" in r.getMessage() for r in caplog.records) == 1


def corrupt_last_byte(path) -> None:
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF  # inside the last tensor's bytes: the header still reads
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["truncated", "flipped", "garbage"])
def test_a_torn_or_corrupt_snapshot_is_deleted_and_the_turn_prefills(tiny_lm, oracle, tmp_path, damage, caplog):
    worker, state, saved = held(tiny_lm, tmp_path, "hf")
    path = worker.disk.write(state, saved)
    (tmp_path / f".{path.name}.999999-abc.tmp").write_bytes(b"half a file")  # a write cut short: never read
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif damage == "flipped":
        corrupt_last_byte(path)
    else:
        path.write_bytes(b"\x00" * 64)
    config = WorkerConfig(num_slots=2, cache_min_tokens=4, kv_dir=str(tmp_path), runner="hf")
    with caplog.at_level(logging.WARNING):
        client = LocalClient(tiny_lm, config, on_step=check_integrity)  # a restart over the same folder
        msgs = list(state.msgs) + [U("And the mountains?")]
        done = chat(client, "r2", msgs, 6)
    assert list(done.token_ids) == oracle.chat(msgs, 6)
    assert done.stats.kind != "disk" and not path.exists()
    assert sum(path.name in r.getMessage() for r in caplog.records) == 1
