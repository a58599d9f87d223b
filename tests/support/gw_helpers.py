"""Helpers for gateway tests: start a gateway over fake hosts, let hopped events land, collect
a request's events."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Awaitable

from desktop.gateway.gateway import Gateway, RequestStream
from desktop.protocol import TERMINAL, Event
from desktop.model.messages import Message
from fake_host import FakeHost


def run(coro: Awaitable[Any], timeout: float = 5.0) -> Any:
    """asyncio.run with a deadline, so that a hang fails the test instead of the suite."""
    async def main() -> Any:
        return await asyncio.wait_for(coro, timeout)
    return asyncio.run(main())


@asynccontextmanager
async def gateway(*hosts: FakeHost, **kw: object) -> AsyncIterator[Gateway]:
    gw = Gateway(hosts, **kw)  # type: ignore[arg-type]
    await gw.start()
    await settle()  # the fakes report IDLE at start; let that land
    try:
        yield gw
    finally:
        await gw.close()


async def settle(rounds: int = 5) -> None:
    """Let events hopped with call_soon_threadsafe from a manual fake host reach their streams."""
    for _ in range(rounds):
        await asyncio.sleep(0)


async def take(stream: RequestStream, n: int = 1) -> list[Event]:
    """The next n events of a stream (fails after a second instead of hanging)."""
    return [await asyncio.wait_for(anext(stream), 1.0) for _ in range(n)]


async def collect(stream: RequestStream) -> list[Event]:
    return [e async for e in stream]


def terminal(events: list[Event]) -> Event:
    ends = [e for e in events if isinstance(e, TERMINAL)]
    assert len(ends) == 1, events
    return ends[0]


def user(text: str) -> Message:
    return Message("user", text)


def bot(text: str) -> Message:
    return Message("assistant", text)


async def turn(gw: Gateway, hosts: tuple[FakeHost, ...], messages: list[Message], reply: str = "Hi!") -> tuple[str, list[Event]]:
    """One chat turn run to its end on whichever fake host the gateway picked."""
    stream = gw.chat(messages)
    await settle()
    host = next(h for h in hosts if stream.request_id in h.active)
    host.finish(stream.request_id, reply)
    return host.worker_id, await collect(stream)
