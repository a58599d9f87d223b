"""A scripted OpenAI-compatible server on 127.0.0.1 for the remote hardening tests: each path's
answer is a coroutine the test sets, and it counts what it sent before the client hung up."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Awaitable, Callable

Reply = Callable[[asyncio.StreamWriter], Awaitable[None]]
SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"


def chunk(content, **extra) -> bytes:
    """One SSE line carrying `content` (any JSON value) as a delta."""
    return ("data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": content}}], **extra}) + "\n\n").encode()


def end(prompt: int = 3, completion: int = 1) -> bytes:
    return ("data: " + json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                                   "usage": {"prompt_tokens": prompt, "completion_tokens": completion}})
            + "\n\ndata: [DONE]\n\n").encode()


def answer(body: bytes | str | object, status: str = "200 OK", kind: str = "application/json", extra: str = "") -> Reply:
    """A whole answer: bytes as they are, a str as UTF-8, anything else as JSON; `extra`: more
    header lines, each ending in \\r\\n."""
    raw = body if isinstance(body, bytes) else body.encode() if isinstance(body, str) else json.dumps(body).encode()

    async def send(writer: asyncio.StreamWriter) -> None:
        writer.write(f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\n{extra}Content-Length: {len(raw)}\r\n\r\n".encode() + raw)
        await writer.drain()
    return send


def stream(*parts: bytes) -> Reply:
    """An event stream of these parts, then the end of the connection."""
    async def send(writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD)
        for part in parts:
            writer.write(part)
        await writer.drain()
    return send


class HostileServer:
    """Answers `routes[path]` (GET or POST); by default a healthy, well-behaved server. `sent`
    counts the bytes written by `flood` before the client hung up; `hung_up` how often it did."""

    def __init__(self) -> None:
        self.routes: dict[str, Reply] = {
            "/health": answer({"status": "ok"}),
            "/v1/models": answer({"data": [{"id": "scripted"}]}),
            "/props": answer({"error": {"message": "not here"}}, "404 Not Found"),
            "/v1/chat/completions": stream(chunk("Hi"), end()),
        }
        self.sent, self.hung_up, self.asked = 0, 0, 0
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self.thread.start()
        assert ready.wait(5)

    def _run(self, ready: threading.Event) -> None:
        async def main() -> None:
            self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
            self.url = "http://127.0.0.1:%d" % self.server.sockets[0].getsockname()[1]
            ready.set()
            async with self.server:
                await self.server.serve_forever()
        try:
            self.loop.run_until_complete(main())
        except asyncio.CancelledError:
            pass
        finally:  # the connections' handlers end here, not when the collector finds them later
            pending = asyncio.all_tasks(self.loop)
            for task in pending:
                task.cancel()
            if pending:
                self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self.loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                _, path, _ = lines[0].split(" ", 2)
                length = next((int(v) for k, _, v in (h.partition(": ") for h in lines[1:]) if k.lower() == "content-length"), 0)
                await reader.readexactly(length)
                if path == "/v1/chat/completions":
                    self.asked += 1
                    self.reader = reader  # a reply that waits for the client to hang up reads it
                    await self.routes[path](writer)
                    return
                await self.routes.get(path, answer({"error": {"message": "not here"}}, "404 Not Found"))(writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def flood(self, head: bytes, piece: bytes, total: int, pause: float = 0.0) -> Reply:
        """A head, then `piece` again and again (`pause` s apart) up to `total` bytes, counted in
        `sent`, until the client hangs up."""
        async def send(writer: asyncio.StreamWriter) -> None:
            writer.write(head)
            try:
                while self.sent < total:
                    writer.write(piece)
                    await writer.drain()
                    self.sent += len(piece)
                    if pause:
                        await asyncio.sleep(pause)
            except ConnectionError:
                self.hung_up += 1
        return send

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.server.close)
        for task in asyncio.all_tasks(self.loop):
            self.loop.call_soon_threadsafe(task.cancel)
        self.thread.join(5)


def wait_for(pred, timeout: float = 15.0) -> None:
    end_at = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end_at, "timed out"
        time.sleep(0.02)
