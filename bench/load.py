"""200 concurrent chat requests over 2 thread workers on the tiny model, through the gateway.

Counts requests that never ended (lost), requests handed to a worker twice (double_assigned, seen
by wrapping each host's submit), and the queue wait (p50/p99). The last line is JSON."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from desktop.gateway.gateway import Gateway  # noqa: E402
from desktop.protocol import Chat, Done, ErrorEvent, QueueDone  # noqa: E402
from desktop.model.loader import ModelSpec  # noqa: E402
from desktop.model.messages import Message  # noqa: E402
from desktop.model.params import SamplingParams  # noqa: E402
from desktop.workers.config import WorkerConfig  # noqa: E402
from desktop.workers.thread_host import ThreadHost  # noqa: E402


class CountingHost(ThreadHost):
    """A thread host that records every Chat it is handed."""

    assigned: Counter = Counter()

    def submit(self, cmd) -> None:
        if isinstance(cmd, Chat):
            CountingHost.assigned[cmd.request_id] += 1
        super().submit(cmd)


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--slots", type=int, default=4)
    args = p.parse_args()
    torch.set_num_threads(1)
    hosts = [CountingHost(f"w{i}", ModelSpec("tiny"), WorkerConfig(num_slots=args.slots), threads=1) for i in range(args.workers)]
    gw = Gateway(hosts, queue_max=args.requests)
    await gw.start()
    assert await gw.wait_ready(120)
    waits: list[float] = []
    ends: Counter = Counter()

    async def one(i: int) -> None:
        msgs = [Message("system", "You are helpful."), Message("user", f"Question {i % 37}: how are you?")]
        terminal = 0
        async for event in gw.chat(msgs, SamplingParams(max_tokens=8)):
            if isinstance(event, QueueDone):
                waits.append(event.waited_ms)
            if isinstance(event, (Done, ErrorEvent)):
                terminal += 1
                ends["done" if isinstance(event, Done) else event.code] += 1
        if terminal != 1:
            ends["bad_terminal_count"] += 1

    start = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(args.requests)))
    wall = time.perf_counter() - start
    await gw.close()
    waits += [0.0] * (args.requests - len(waits))  # requests dispatched without queueing
    waits.sort()
    ended = sum(v for k, v in ends.items() if k != "bad_terminal_count")
    print(json.dumps({
        "requests": args.requests, "workers": args.workers, "wall_s": round(wall, 2), "ends": dict(ends),
        "lost": args.requests - ended,
        "double_assigned": sum(1 for n in CountingHost.assigned.values() if n > 1),
        "p50_queue_ms": round(statistics.median(waits), 1),
        "p99_queue_ms": round(waits[min(len(waits) - 1, int(0.99 * len(waits)))], 1),
    }))


if __name__ == "__main__":
    asyncio.run(main())
