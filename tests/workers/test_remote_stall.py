"""A remote server that stops sending mid-reply while its /health still answers: the request ends
with a clear remote_stalled error after `stall_s` (before the answer's head, before its first line,
or between lines), the connection is closed (which stops the server's work), and the worker stays
up for the next request. The server is a small scripted HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

from desktop.model.messages import Message
from desktop.model.params import SamplingParams
from desktop.protocol import Chat, ChunkEvent, Done, ErrorEvent, WorkerState, WorkerStatus
from desktop.workers.remote.host import RemoteHost
from desktop.workers.remote.outcome import STALLED
from desktop.workers.remote.spec import RemoteSpec
from hostile_server import SSE_HEAD, HostileServer, chunk, end

CHUNK, END = chunk("Hi"), end()

class ScriptedServer(HostileServer):
    """The hostile server's healthy /health and /v1/models; /v1/chat/completions does what `mode`
    says: "no_head" (never answers), "silent" (answers the head, then nothing), "one_line" (one
    content line, then nothing), "whole" (a whole short reply). `hung_up` counts the reply
    connections the client closed."""

    def __init__(self) -> None:
        self.mode = "whole"
        super().__init__()
        self.routes["/v1/chat/completions"] = self._reply

    async def _reply(self, writer: asyncio.StreamWriter) -> None:
        if self.mode != "no_head":
            writer.write(SSE_HEAD)
        if self.mode in ("one_line", "whole"):
            writer.write(CHUNK)
        if self.mode == "whole":
            writer.write(END)
            await writer.drain()
            return
        await writer.drain()
        await self.reader.read()  # b"" once the client hangs up; this server never sends more
        self.hung_up += 1


@pytest.fixture
def scripted():
    server = ScriptedServer()
    seen: list = []
    host = RemoteHost("r0", RemoteSpec(server.url), health_s=0.2, backoff=(0.1, 0.4), timeout_s=2.0, stall_s=(1.0, 0.8))
    host.start(lambda _w, e: seen.append(e))
    try:
        wait_for(lambda: any(isinstance(e, WorkerStatus) and e.state is WorkerState.IDLE for e in seen))
        yield server, host, seen
    finally:
        host.close()
        server.close()


def wait_for(pred, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.02)


def ask(host: RemoteHost, seen: list, rid: str) -> tuple[list, float]:
    """Send a chat; its events and how long it took to end."""
    t0 = time.monotonic()
    host.submit(Chat(rid, (Message("user", "Hello?"),), SamplingParams(max_tokens=4)))
    mine = lambda: [e for e in seen if getattr(e, "request_id", None) == rid and not isinstance(e, WorkerStatus)]  # noqa: E731
    wait_for(lambda: any(isinstance(e, (Done, ErrorEvent)) for e in mine()))
    return mine(), time.monotonic() - t0


@pytest.mark.parametrize("mode, wait_s, said", [
    ("no_head", 1.0, "began no reply for 1 s"),
    ("silent", 1.0, "began no reply for 1 s"),
    ("one_line", 0.8, "sent nothing more for 0.8 s"),
])
def test_a_stream_that_stops_sending_ends_its_request_clearly_and_the_worker_serves_on(scripted, mode, wait_s, said):
    server, host, seen = scripted
    server.mode = mode
    events, took = ask(host, seen, "stuck")
    end = events[-1]
    assert isinstance(end, ErrorEvent) and end.code == STALLED and end.retryable, end
    assert said in end.message and server.url in end.message, end.message
    assert wait_s <= took < wait_s + 2.0, took
    assert [e.text_delta for e in events if isinstance(e, ChunkEvent)] == (["Hi"] if mode == "one_line" else [])
    if mode != "no_head":
        wait_for(lambda: server.hung_up == 1)  # the connection was closed: the server can stop its work
    server.mode = "whole"
    events, _ = ask(host, seen, "next")
    assert isinstance(events[-1], Done) and events[-1].text == "Hi", events[-1]
    assert not any(isinstance(e, WorkerStatus) and e.state is WorkerState.ERROR for e in seen)


def test_a_slow_but_steady_stream_is_not_cut(scripted):
    """Lines that keep coming, each within the window, are a reply being written, however long it takes."""
    server, host, seen = scripted

    async def slow(writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD)
        for _ in range(4):  # as many as the request's max_tokens
            await asyncio.sleep(0.3)  # well under the 0.8 s window each time; 1.2 s in all
            writer.write(CHUNK)
            await writer.drain()
        writer.write(END)
        await writer.drain()

    server.routes["/v1/chat/completions"] = slow
    events, took = ask(host, seen, "slow")
    assert isinstance(events[-1], Done), events[-1]
    assert events[-1].text == "Hi" * 4 and took >= 1.2
