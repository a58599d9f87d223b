"""Issue 19, item 10: no work before authorisation, and limits in the local API. The key and the
body's size are checked before the body is read; heads and bodies are bounded in size and time;
idle and slow connections are cut; connections past the bound get 503 with Retry-After."""

from __future__ import annotations

import asyncio
import os
import socket
from contextlib import asynccontextmanager
from typing import AsyncIterator

import httpx
import pytest

from api_helpers import run
from desktop.api.app import make_app
from desktop.api.limits import Limits, raise_open_files
from desktop.api.server import ApiServer, ApiState

pytestmark = pytest.mark.hardening
KEY = "k-12345678"
CHAT = "/v1/chat/completions"


@asynccontextmanager
async def server(limits: Limits = Limits(), key: str | None = KEY) -> AsyncIterator[tuple[ApiServer, int]]:
    """The API (no model: /health answers "no_model") on 127.0.0.1:<free port>."""
    api = ApiServer(lambda k, local: make_app(lambda: None, key=k, local_only=local, limits=limits), limits)
    status = await api.start("127.0.0.1", 0, key)
    assert status.state is ApiState.LISTENING, status
    try:
        yield api, status.port
    finally:
        await api.stop()


async def connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port)


async def response_of(reader: asyncio.StreamReader, within: float = 20.0) -> bytes:
    """Everything the server sends until it closes (or `within` s pass: then what came)."""
    data = b""
    try:
        async with asyncio.timeout(within):
            while chunk := await reader.read(65536):
                data += chunk
    except (TimeoutError, ConnectionError):
        pass
    return data


async def closed_quietly(reader: asyncio.StreamReader, within: float = 20.0) -> bool:
    """Whether the server closes the connection within `within` s without a word."""
    try:
        async with asyncio.timeout(within):
            return await reader.read(65536) == b""
    except ConnectionError:
        return True
    except TimeoutError:
        return False


def head(path: str = CHAT, method: str = "POST", **headers: str) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"] + [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_without_the_key_the_body_is_never_read() -> None:
    """In process: a 4 MB body without the key reads not one byte of it; the reply is 401."""
    async def main() -> None:
        app = make_app(lambda: None, key=KEY)
        pulled = []

        async def count(scope, receive, send):
            async def counted():
                message = await receive()
                pulled.append(len(message.get("body", b"")))
                return message
            await app(scope, counted, send)

        body = b'{"messages": [' + b'{"role": "user", "content": "xxxxxxxx"},' * 100_000 + b'{}]}'
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=count), base_url="http://api") as client:
            r = await client.post(CHAT, content=body, headers={"Content-Type": "application/json"})
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
        assert sum(pulled) == 0, f"{sum(pulled):,} bytes of the body were read before the key was checked"
    run(main())


def test_a_huge_declared_body_is_refused_before_it_is_sent() -> None:
    """Real server: headers that declare 50 MB and no body yet are answered at once: 401 without
    the key, 413 with it (over the cap); neither waits for a byte of the body."""
    async def main() -> None:
        async with server() as (_, port):
            for auth, status in (({}, b" 401 "), ({"Authorization": f"Bearer {KEY}"}, b" 413 ")):
                reader, writer = await connect(port)
                writer.write(head(Content_Type="application/json", Content_Length=str(50 << 20), **auth))
                answer = await response_of(reader, within=20)
                writer.close()
                assert answer.startswith(b"HTTP/1.1") and status in answer.split(b"\r\n")[0], answer[:200]
                assert b"connection: close" in answer.lower()
    run(main())


def test_a_streamed_body_over_the_cap_is_cut_at_the_cap() -> None:
    """A chunked body (no Content-Length) is counted as it comes: 413 once past the cap, before
    the rest is read, and nothing of it reaches the JSON parser."""
    async def main() -> None:
        limits = Limits(max_body_bytes=1 << 20)
        sent = 0

        async def chunks():
            nonlocal sent
            for _ in range(64):  # 64 × 256 KB: 16 MB offered
                sent += 256 << 10
                yield b" " * (256 << 10)

        app = make_app(lambda: None, key=KEY, limits=limits)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api",
                                     headers={"Authorization": f"Bearer {KEY}"}) as client:
            r = await client.post(CHAT, content=chunks(), headers={"Content-Type": "application/json"})
        assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large", r.text
        assert "1.0 MB" in r.json()["error"]["message"]
        assert sent <= 2 << 20, f"{sent:,} bytes were read for a 1 MB cap"
    run(main())


def test_a_huge_header_is_refused_without_reading_it_all() -> None:
    """An 8 MB header is answered 431 (or the connection cut) long before the server has read it."""
    async def main() -> None:
        async with server() as (_, port):
            reader, writer = await connect(port)
            writer.write(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ")
            sent, cut = 0, False
            try:
                for _ in range(128):  # 128 × 64 KB
                    writer.write(b"a" * (64 << 10))
                    await asyncio.wait_for(writer.drain(), 20)
                    sent += 64 << 10
            except (ConnectionError, TimeoutError):
                cut = True
            answer = await response_of(reader, within=20)
            writer.close()
            assert cut or b" 431 " in answer.split(b"\r\n")[0], (sent, answer[:200])
            assert not answer or b" 431 " in answer.split(b"\r\n")[0], answer[:200]
    run(main())


def test_a_slow_head_is_cut_in_bounded_time() -> None:
    """Slowloris: headers at a byte every 0.1 s keep no connection beyond the head timeout (1 s
    here; the test allows 30); a connection that sends nothing at all is closed too."""
    async def main() -> None:
        async with server(Limits(head_timeout_s=1.0)) as (_, port):
            idle_reader, idle_writer = await connect(port)
            reader, writer = await connect(port)

            async def trickle() -> None:
                writer.write(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
                while True:
                    writer.write(b"x")
                    await writer.drain()
                    await asyncio.sleep(0.1)

            task = asyncio.ensure_future(trickle())
            answer = await response_of(reader, within=30)
            trickling = not task.done()
            task.cancel()
            assert reader.at_eof() or not trickling, "a connection sending its headers a byte at a time was never cut"
            assert not answer or answer.startswith(b"HTTP/1.1 408"), answer[:200]
            assert await closed_quietly(idle_reader, within=30)
            writer.close()
            idle_writer.close()
    run(main())


def test_idle_connections_are_bounded_and_give_way_to_a_request() -> None:
    """200 idle connections against a bound of 20 (+ 10 waiting): the server holds at most 30
    sockets for them, and a client with a request is served before they time out (the oldest
    idle one makes room). (That idle connections time out: test_a_slow_head_is_cut_in_bounded_time.)"""
    async def main() -> None:
        limits = Limits(max_connections=20, max_waiting=10, head_timeout_s=60.0)
        async with server(limits, key=None) as (api, port):
            before = open_fds()
            idle = [await connect(port) for _ in range(200)]
            await asyncio.sleep(0.3)
            held = open_fds() - before - 200  # the server's side of the 200 client sockets
            assert held <= 30, f"the server holds {held} sockets for idle connections (bound 20 + 10)"
            reader, writer = await connect(port)
            writer.write(head("/health", "GET", Connection="close"))
            answer = await response_of(reader, within=20)
            assert answer.startswith(b"HTTP/1.1 200"), answer[:300]
            assert await closed_quietly(idle[0][0])  # the oldest made room
            for _, w in idle + [(reader, writer)]:
                w.close()
    run(main())


def test_past_the_bound_of_busy_connections_503_with_retry_after() -> None:
    """20 connections each in the middle of a request fill the bound: the next request gets 503
    with Retry-After (and the error's JSON), and is served again once they are gone."""
    async def main() -> None:
        limits = Limits(max_connections=20, max_waiting=10, head_timeout_s=30.0, retry_after_s=3)
        async with server(limits, key=None) as (api, port):
            busy = []
            for _ in range(20):
                r, w = await connect(port)
                w.write(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # its head, not yet whole
                busy.append((r, w))
            await asyncio.sleep(0.3)
            reader, writer = await connect(port)
            writer.write(head("/health", "GET"))
            answer = await response_of(reader, within=20)
            first = answer.split(b"\r\n\r\n")[0].lower()
            assert first.startswith(b"http/1.1 503") and b"retry-after: 3" in first, answer[:300]
            assert b"too_many_connections" in answer
            for _, w in busy:
                w.close()
            await asyncio.sleep(0.3)
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=20) as client:
                assert (await client.get("/health")).status_code == 200
    run(main())


def test_a_client_that_stops_reading_is_cut_and_its_reply_ends() -> None:
    """A client that asks for a long reply and reads none of it is dropped after write_stall_s
    (1 s here; the test allows 30), and the app is told (as a disconnect, which cancels a chat)."""
    async def main() -> None:
        told = asyncio.Event()

        async def endless(scope, receive, send) -> None:
            await receive()  # the (empty) body

            async def write() -> None:
                await send({"type": "http.response.start", "status": 200, "headers": []})
                while not told.is_set():
                    await send({"type": "http.response.body", "body": b"x" * 65536, "more_body": True})
            writer = asyncio.ensure_future(write())
            if (await receive())["type"] == "http.disconnect":
                told.set()
            writer.cancel()

        api = ApiServer(lambda k, local: endless, Limits(write_stall_s=1.0))
        status = await api.start("127.0.0.1", 0)
        try:
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(("127.0.0.1", status.port))
            sock.sendall(head("/", "GET"))  # and never reads
            await asyncio.wait_for(told.wait(), 30)
            sock.close()
        finally:
            await api.stop()
    run(main())


def test_the_open_file_limit_is_raised_as_far_as_the_hard_limit_allows() -> None:
    resource = pytest.importorskip("resource")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    low = min(256, soft)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))
        got = raise_open_files(4096)
        want = 4096 if hard == resource.RLIM_INFINITY else min(4096, hard)
        assert got == (want, hard) and resource.getrlimit(resource.RLIMIT_NOFILE)[0] == want
        assert raise_open_files(300) == (want, hard)  # never lowered
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_the_app_raises_the_open_file_limit_at_start(monkeypatch, tmp_path, capsys) -> None:
    """Every start goes through cli.main (`omnidesk`, `python -m desktop`) or cli.main_gui."""
    resource = pytest.importorskip("resource")
    from desktop import cli

    monkeypatch.setenv("OMNIDESK_DATA_DIR", str(tmp_path))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= 256:
        pytest.skip("the hard limit leaves nothing to raise")
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        assert cli.main(["chat", "--list"]) == 0
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] > 256
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
