"""Issue 8, item 14: a long prompt reports how far its prefill is (tokens done of the total, and
the time left), from the worker through the gateway onto the request's stream; short prompts
send nothing, and the worker sends at most a few a second."""

from __future__ import annotations

import pytest

from desktop.gateway.gateway import Gateway
from desktop.protocol import Chat, ChunkEvent, Done, PrefillDone, PrefillProgress
from desktop.chat.reply import prefill_left
from desktop.model.loader import ModelSpec, load_model
from desktop.model.messages import Message
from desktop.model.params import SamplingParams
from desktop.workers.config import WorkerConfig
from desktop.workers.thread_host import ThreadHost
from desktop.workers.worker import PROGRESS_S, Worker
from gw_helpers import collect, run

pytestmark = pytest.mark.hardening

LONG = " ".join(f"word{i}" for i in range(100))  # ~600 tokens for the tiny tokenizer


def test_a_long_prompt_reports_prefill_progress_through_the_gateway() -> None:
    async def main() -> None:
        config = WorkerConfig(num_slots=2, prefill_chunk=8, prefill_budget=8)
        gw = Gateway([ThreadHost("w0", ModelSpec("tiny"), config, threads=1)])
        await gw.start()
        assert await gw.wait_ready(timeout=60)
        try:
            events = await collect(gw.chat([Message("user", LONG)], SamplingParams(max_tokens=3)))
            progress = [e for e in events if isinstance(e, PrefillProgress)]
            done = next(e for e in events if isinstance(e, PrefillDone))
            assert progress, [type(e).__name__ for e in events]
            assert events.index(progress[-1]) < events.index(done)  # all of them before the prefill ends
            assert all(p.total == done.input_tokens and 0 < p.done < p.total for p in progress)
            assert [p.done for p in progress] == sorted({p.done for p in progress})  # growing
            assert progress[0].done == 8 and progress[0].cached == 0 and progress[0].elapsed_ms > 0
            left = prefill_left(progress[0], progress[-1])  # None from a single report
            assert left is None or left >= 0
            assert isinstance(events[-1], Done)
        finally:
            await gw.close()

    run(main(), timeout=90)


def test_the_worker_sends_at_most_one_progress_event_per_interval() -> None:
    now = [100.0]
    events = []

    def clock() -> float:
        now[0] += PROGRESS_S / 4  # every chunk takes a quarter of the interval
        return now[0]

    worker = Worker(load_model(ModelSpec("tiny")), WorkerConfig(prefill_chunk=8, prefill_budget=8),
                    emit=events.append, clock=clock)
    worker.submit(Chat("r1", (Message("user", LONG),), SamplingParams(max_tokens=1)))
    while worker.step():
        pass
    progress = [e for e in events if isinstance(e, PrefillProgress)]
    chunks = -(-next(e for e in events if isinstance(e, PrefillDone)).input_tokens // 8)
    assert chunks > 20 and 0 < len(progress) <= chunks / 2  # throttled: far fewer than the chunks
    first, second = progress[0], progress[1]
    assert second.elapsed_ms > first.elapsed_ms  # the reports carry the pace the bubble's estimate needs
    left = prefill_left(first, second)
    assert left is not None and left > 0
    assert not any(isinstance(e, ChunkEvent) for e in events[: events.index(progress[-1])])
    events.clear()
    one_chunk = Worker(worker.lm, WorkerConfig(), emit=events.append)  # 512 tokens a chunk
    one_chunk.submit(Chat("r2", (Message("user", "Hi"),), SamplingParams(max_tokens=1)))
    while one_chunk.step():
        pass
    assert isinstance(events[-1], Done) and not any(isinstance(e, PrefillProgress) for e in events)
