"""The disk tier inside a worker: a conversation whose slot was evicted (or cropped away by
another branch) comes back from its snapshot, after a restart too, an edit restores the longest
prefix; output with a restore equals output without any cache (greedy, fp32)."""

from __future__ import annotations

import logging
import threading

import pytest
from worker_helpers import S, A, U, chat, check_integrity

from desktop.protocol import Chat, CreateSession, EndSession, Generate
from desktop.model.params import SamplingParams
from desktop.workers.config import WorkerConfig
from desktop.workers.kv_disk.files import SnapshotDir
from desktop.workers.kv_disk.writer import SpillWriter
from desktop.workers.local import LocalClient

RUNNERS = pytest.mark.parametrize("runner", ["hf", "static"])


def client_for(lm, folder, runner="hf", **config) -> LocalClient:
    config = {"num_slots": 1, "cache_min_tokens": 8, "kv_dir": str(folder), "runner": runner} | config
    return LocalClient(lm, WorkerConfig(**config), on_step=check_integrity)


def turn(client, oracle, rid, msgs, n=6):
    done = chat(client, rid, msgs, n)
    assert list(done.token_ids) == oracle.chat(msgs, n), (rid, done.stats)
    client.worker.writer.flush(30)
    return done


def in_ram(lm, oracle, steps) -> int:
    """What the last of `steps` (rid, msgs) reuses when nothing leaves RAM: what a restore must match."""
    client = LocalClient(lm, WorkerConfig(num_slots=4, cache_min_tokens=8), on_step=check_integrity)
    return [chat(client, rid, msgs, 6) for rid, msgs in steps][-1].stats.cached_tokens


def other(client, oracle) -> None:
    """Another conversation takes the only slot: the first one's KV leaves RAM."""
    turn(client, oracle, "other", [U("Something else entirely, about trains and stations.")])


@RUNNERS
def test_an_evicted_conversation_is_restored_from_disk(tiny_lm, oracle, tmp_path, runner):
    client = client_for(tiny_lm, tmp_path, runner)
    conv = [S, U("Hello there, how are you doing today?")]
    conv.append(A(turn(client, oracle, "a1", conv).text))
    other(client, oracle)
    conv.append(U("And tomorrow?"))
    done = turn(client, oracle, "a2", conv)
    assert done.stats.kind == "disk" and done.stats.miss_reason == "restored from disk"
    assert done.stats.cached_tokens == in_ram(tiny_lm, oracle, [("a1", conv[:2]), ("a2", conv)]) > 0


@RUNNERS
def test_a_new_worker_over_the_same_folder_restores(tiny_lm, oracle, tmp_path, runner):
    client = client_for(tiny_lm, tmp_path, runner, num_slots=2)
    conv = [S, U("Hello there, how are you doing today?")]
    conv.append(A(turn(client, oracle, "a1", conv).text))
    client.worker.close()  # what Shutdown does: every idle conversation goes to disk
    assert len(SnapshotDir(tmp_path).entries()) == 1
    again = client_for(tiny_lm, tmp_path, runner, num_slots=2)
    conv.append(U("And tomorrow?"))
    assert turn(again, oracle, "a2", conv).stats.kind == "disk"


def test_an_edit_restores_the_longest_prefix_on_disk(tiny_lm, oracle, tmp_path):
    client = client_for(tiny_lm, tmp_path)
    conv = [S, U("Hello there, how are you doing today?")]
    conv.append(A(turn(client, oracle, "a1", conv).text))
    conv.append(U("Tell me a story about a cat."))
    conv.append(A(turn(client, oracle, "a2", conv).text))
    other(client, oracle)
    edited = conv[:3] + [U("Tell me a story about a dog instead.")]
    done = turn(client, oracle, "a3", edited)
    assert done.stats.kind == "disk" and done.stats.miss_reason == "edited"
    assert done.stats.cached_tokens == in_ram(tiny_lm, oracle, [("a1", conv[:2]), ("a2", conv[:4]), ("a3", edited)]) > 0
    assert len(SnapshotDir(tmp_path).entries()) >= 2  # the first branch is still there


def test_ram_is_preferred_when_it_holds_as_much(tiny_lm, oracle, tmp_path):
    client = client_for(tiny_lm, tmp_path, num_slots=2)
    conv = [S, U("Hello there, how are you doing today?")]
    conv.append(A(turn(client, oracle, "a1", conv).text))
    client.worker.close()
    again = client_for(tiny_lm, tmp_path, num_slots=2)
    conv.append(U("And tomorrow?"))
    assert turn(again, oracle, "a2", conv).stats.kind == "disk"
    conv.append(A(chat(again, "a2b", conv, 6).text))  # regenerate: in RAM now
    conv.append(U("Thanks."))
    assert turn(again, oracle, "a3", conv).stats.kind in ("extend", "hit")


def test_sessions_and_short_conversations_stay_off_disk(tiny_lm, oracle, tmp_path):
    client = client_for(tiny_lm, tmp_path, num_slots=2, cache_min_tokens=60)
    turn(client, oracle, "short", [U("Hi")])
    client.run(CreateSession("s0", "sess", "You are a voice assistant."))
    client.run(Generate("s1", "sess", SamplingParams(max_tokens=4), (U("Hello, how long is a day on Mars?"),)))
    client.run(EndSession("s2", "sess"))
    client.worker.close()
    assert SnapshotDir(tmp_path).entries() == []


def test_the_disk_budget_keeps_the_most_recently_used(tiny_lm, oracle, tmp_path):
    budget = 60_000
    client = client_for(tiny_lm, tmp_path, kv_disk_budget_bytes=budget)
    for i in range(4):
        turn(client, oracle, f"c{i}", [U(f"Conversation number {i}: tell me about the number {i}.")])
    entries = SnapshotDir(tmp_path).entries()
    assert entries and sum(e.size for e in entries) <= budget
    assert len(client.worker.disk) == len(entries)


def test_a_writer_behind_drops_a_spill_rather_than_wait(caplog):
    release = threading.Event()
    writer = SpillWriter(lambda state, saved: release.wait(10), max_backlog_bytes=100)

    class State:
        ids = (1, 2, 3)

    assert writer.submit(State(), None, 80)
    with caplog.at_level(logging.WARNING):
        assert not writer.submit(State(), None, 80)
    assert writer.dropped == 1 and sum("not written" in r.getMessage() for r in caplog.records) == 1
    release.set()
    assert writer.close(5) and writer.written == 1


def test_without_a_folder_there_is_no_disk_tier(tiny_lm):
    client = LocalClient(tiny_lm, WorkerConfig(num_slots=1))
    assert client.worker.disk is None and client.worker.writer is None
    client.run(Chat("x", (U("Hi"),), SamplingParams(max_tokens=2)))
    client.worker.close()


def test_an_image_conversation_under_m_rope_is_restored(tmp_path):
    """Qwen2-VL's 3-D positions: the restored slot's image places (its RopeTrack) come back too."""
    from test_cache_invariant_images import IMAGES, VisionOracle

    from desktop.model.loader import ModelSpec, load_model
    from desktop.model.messages import Message

    lm = load_model(ModelSpec("tiny-qwen2vl"))
    oracle = VisionOracle(lm)
    client = client_for(lm, tmp_path, cache_min_tokens=4)
    conv = [Message("user", "What is in this picture?", (IMAGES[0],))]
    done = chat(client, "i1", conv, 5)
    assert list(done.token_ids) == oracle.chat(conv, 5)
    conv.append(A(done.text))
    chat(client, "other", [U("Something else entirely.")], 5)
    client.worker.writer.flush(30)
    conv.append(U("And its colours?"))
    done = chat(client, "i2", conv, 5)
    assert done.stats.kind == "disk" and list(done.token_ids) == oracle.chat(conv, 5)


def test_snapshots_are_named_for_their_conversation(tiny_lm, oracle, tmp_path):
    """A branch cropped away for another conversation (same system prompt) goes to disk under its
    own conversation's id, and comes back from there."""
    client = client_for(tiny_lm, tmp_path)
    conv = [S, U("Hello there, how are you doing today?")]
    done = client.run(Chat("a1", tuple(conv), SamplingParams(max_tokens=6), conversation="conv1"))[-1]
    conv.append(A(done.text))
    client.run(Chat("b1", (S, U("Another one, about trains.")), SamplingParams(max_tokens=6), conversation="conv2"))
    client.worker.writer.flush(30)
    assert [e.conversation for e in SnapshotDir(tmp_path).entries()] == ["conv1"]
    conv.append(U("And tomorrow?"))
    done = client.run(Chat("a2", tuple(conv), SamplingParams(max_tokens=6), conversation="conv1"))[-1]
    assert done.stats.kind == "disk" and list(done.token_ids) == oracle.chat(conv, 6)


def test_a_conversation_already_on_disk_is_not_written_again(tiny_lm, oracle, tmp_path):
    client = client_for(tiny_lm, tmp_path, num_slots=2)
    conv = [S, U("Hello there, how are you doing today?")]
    turn(client, oracle, "a1", conv)
    sched = client.worker.scheduler
    assert sched.spill_all() == 1
    client.worker._sync()
    client.worker.writer.flush(30)
    assert sched.spill_all() == 0 and not sched.ops  # the file holds it all already
