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

CHUNK = "data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": "Hi"}}]}) + "\n\n"
END = ("data: " + json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                              "usage": {"prompt_tokens": 3, "completion_tokens": 1}}) + "\n\ndata: [DONE]\n\n")


class ScriptedServer:
    """/health and /v1/models answer; /v1/chat/completions does what `mode` says:
    "no_head" (never answers), "silent" (answers the head, then nothing), "one_line" (one
    content line, then nothing), "whole" (a whole short reply). `hung_up` counts the reply
    connections the client closed."""

    def __init__(self) -> None:
        self.mode, self.hung_up = "whole", 0
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert self.ready.wait(5)

    def _run(self) -> None:
        async def main() -> None:
            self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
            self.url = "http://127.0.0.1:%d" % self.server.sockets[0].getsockname()[1]
            self.ready.set()
            async with self.server:
                await self.server.serve_forever()
        try:
            self.loop.run_until_complete(main())
        except asyncio.CancelledError:
            pass

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                length = next((int(v) for k, _, v in (h.partition(": ") for h in lines[1:]) if k.lower() == "content-length"), 0)
                await reader.readexactly(length)
                if path == "/v1/chat/completions":
                    await self._reply(reader, writer)
                    return
                body = json.dumps({"status": "ok"} if path == "/health" else {"data": [{"id": "scripted"}]}
                                  if path == "/v1/models" else {"error": {"message": "not here"}}).encode()
                status = "404 Not Found" if path not in ("/health", "/v1/models") else "200 OK"
                writer.write(f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _reply(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.mode != "no_head":
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
        if self.mode in ("one_line", "whole"):
            writer.write(CHUNK.encode())
        if self.mode == "whole":
            writer.write(END.encode())
            await writer.drain()
            return
        await writer.drain()
        await reader.read()  # b"" once the client hangs up; this server never sends more
        self.hung_up += 1

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.server.close)
        for task in asyncio.all_tasks(self.loop):
            self.loop.call_soon_threadsafe(task.cancel)
        self.thread.join(5)


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

    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
        for _ in range(4):  # as many as the request's max_tokens
            await asyncio.sleep(0.3)  # well under the 0.8 s window each time; 1.2 s in all
            writer.write(CHUNK.encode())
            await writer.drain()
        writer.write(END.encode())
        await writer.drain()

    server._reply = slow
    events, took = ask(host, seen, "slow")
    assert isinstance(events[-1], Done), events[-1]
    assert events[-1].text == "Hi" * 4 and took >= 1.2
