"""Random operation sequences against the gateway over manual fake hosts: whatever the order of
arrivals, cancels, finishes, failures, crashes and recoveries, every stream ends exactly once,
no command is sent twice and no host is ever asked beyond its capacity or slots."""

from __future__ import annotations

import asyncio
from collections import Counter

from hypothesis import given, settings, strategies as st

from desktop.gateway.gateway import Gateway
from desktop.protocol import TERMINAL, Stop
from desktop.errors import OmnideskError
from fake_host import FakeHost
from gw_helpers import run, settle, user

OPS = ["chat", "chat", "cancel", "finish", "finish", "fail", "crash", "recover", "session", "generate", "end"]


@settings(max_examples=100, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 50)), max_size=30))
def test_random_operations_end_every_request_once(ops: list[tuple[str, int]]) -> None:
    async def main() -> None:
        hosts = [FakeHost("w1", capacity=2, num_slots=2), FakeHost("w2", capacity=1, num_slots=2)]
        gw = Gateway(hosts, queue_max=8)
        await gw.start()
        await settle()
        streams, sessions, tasks = [], [], []
        for op, n in ops:
            host = hosts[n % 2]
            try:
                if op == "chat":
                    streams.append(gw.chat([user(f"c{n % 4}")]))
                elif op == "cancel" and streams:
                    await gw.cancel(streams[n % len(streams)].request_id)
                elif op in ("finish", "fail") and host.active:
                    rid = sorted(host.active)[n % len(host.active)]
                    host.finish(rid) if op == "finish" else host.fail(rid)
                elif op == "crash":
                    host.crash()
                elif op == "recover":
                    host.recover()
                elif op == "session":
                    tasks.append(asyncio.create_task(gw.create_session()))
                elif op == "generate" and sessions:
                    streams.append(gw.generate_stream(sessions[n % len(sessions)]))
                elif op == "end" and sessions:
                    tasks.append(asyncio.create_task(gw.end_session(sessions[n % len(sessions)])))
            except OmnideskError:
                pass  # queue full, unknown request or session: refused at the door
            await settle()
            sessions = [t.result() for t in tasks if t.done() and not t.exception() and isinstance(t.result(), str)]
        for _ in range(50):  # let everything run out
            for host in hosts:
                for rid in sorted(host.active):
                    host.finish(rid)
            await settle()
        await gw.close()
        await asyncio.gather(*tasks, return_exceptions=True)
        for stream in streams:
            events = [e async for e in stream]
            assert sum(isinstance(e, TERMINAL) for e in events) == 1, events
            assert isinstance(events[-1], TERMINAL)
        for host in hosts:
            assert not host.violations
            sent = Counter(c.request_id for c in host.commands if not isinstance(c, Stop))
            assert all(v == 1 for v in sent.values()), sent
    run(main(), timeout=10)
