"""The real server: uvicorn on 127.0.0.1 on the test's own asyncio loop, used by the official
openai client (streaming and not) and by curl; a taken port is a state, not a traceback; stop and
start again on the same port."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket

import pytest
from openai import APIStatusError, AsyncOpenAI

from api_helpers import MODEL, run, served, sse_data, user
from desktop.api.address import is_loopback
from desktop.api.server import ApiServer, ApiState


def test_the_openai_client_streaming_and_not() -> None:
    async def main() -> None:
        async with served(real=True, key="k-123456") as s:
            client = AsyncOpenAI(base_url=f"{s.url}/v1", api_key="k-123456", max_retries=0)
            assert [m.id async for m in client.models.list()] == [MODEL]
            msgs = [{"role": "system", "content": "Be brief."}, user("What is a cache?")]
            first = await client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=5, seed=2)
            assert first.choices[0].finish_reason in ("stop", "length") and first.usage.completion_tokens > 0
            msgs += [{"role": "assistant", "content": first.choices[0].message.content}, user("Why?")]
            stream = await client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=5, seed=2,
                                                          stream=True, stream_options={"include_usage": True})
            parts, usage = [], None
            async for chunk in stream:
                if chunk.choices:
                    parts.append(chunk.choices[0].delta.content or "")
                usage = chunk.usage or usage
            assert "".join(parts) and usage is not None
            assert usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens  # the first turn's KV
            bad = AsyncOpenAI(base_url=f"{s.url}/v1", api_key="wrong", max_retries=0)
            with pytest.raises(APIStatusError) as err:
                await bad.chat.completions.create(model=MODEL, messages=msgs)
            assert err.value.status_code == 401 and err.value.code == "invalid_api_key"
            await client.close()
            await bad.close()
    run(main())


def test_a_request_for_another_host_name_is_refused_on_loopback() -> None:
    async def main() -> None:
        async with served(real=True) as s:
            for host in ("127.0.0.1", f"127.0.0.1:{s.url.rsplit(':', 1)[1]}", "localhost:1", "[::1]:80", "[::1]"):
                assert (await s.client.get("/v1/models", headers={"Host": host})).status_code == 200, host
            r = await s.client.get("/v1/models", headers={"Host": "evil.example:8765"})
            assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_host"
    run(main())


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed on this machine")
def test_curl() -> None:
    async def main() -> None:
        async with served(real=True) as s:
            async def curl(*args: str) -> str:
                proc = await asyncio.create_subprocess_exec("curl", "-sS", "--max-time", "30", *args,
                                                            stdout=asyncio.subprocess.PIPE)
                out, _ = await proc.communicate()
                assert proc.returncode == 0
                return out.decode()
            body = json.dumps({"model": MODEL, "messages": [user("Hi")], "max_tokens": 4})
            reply = json.loads(await curl(f"{s.url}/v1/chat/completions", "-H", "Content-Type: application/json",
                                          "-d", body))
            assert reply["choices"][0]["message"]["role"] == "assistant" and reply["usage"]["completion_tokens"] > 0
            streamed = await curl("-N", f"{s.url}/v1/chat/completions", "-H", "Content-Type: application/json",
                                  "-d", json.dumps({**json.loads(body), "stream": True}))
            assert sse_data(streamed)[-1] == "[DONE]"
            status = await curl("-o", "/dev/null", "-w", "%{http_code}", f"{s.url}/v1/chat/completions",
                                "-H", "Content-Type: application/json", "-d", "{}")
            assert status == "400"
    run(main())


def test_a_port_in_use_is_a_state_and_the_server_restarts_on_the_same_port() -> None:
    async def main() -> None:
        taken = socket.socket()
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        seen: list[ApiState] = []
        server = ApiServer(lambda key, local_only: _hello)
        server.listeners.append(lambda st: seen.append(st.state))
        status = await server.start("127.0.0.1", port)
        assert status.state is ApiState.PORT_IN_USE and str(port) in status.message
        taken.close()
        status = await server.start("127.0.0.1", port)
        assert status.state is ApiState.LISTENING and status.port == port and status.url == f"http://127.0.0.1:{port}"
        assert (await _get(port)).startswith("HTTP/1.1 200")
        assert (await server.stop()).state is ApiState.OFF
        with pytest.raises(OSError):
            await _get(port)
        assert (await server.start("127.0.0.1", port)).state is ApiState.LISTENING  # the port is free again
        await server.stop()
        await server.stop()  # idempotent
        assert seen == [ApiState.STARTING, ApiState.PORT_IN_USE, ApiState.OFF, ApiState.STARTING, ApiState.LISTENING,
                        ApiState.OFF, ApiState.STARTING, ApiState.LISTENING, ApiState.OFF]
        refused = await server.start("0.0.0.0", 0)  # beyond this computer: a key is required
        assert refused.state is ApiState.ERROR and "key" in refused.message
        bad = await server.start("203.0.113.7", 0, "a-key-1234")  # not an address of this computer
        assert bad.state is ApiState.ERROR and "Could not listen" in bad.message
    run(main(), timeout=30)


def test_loopback_addresses() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "localhost", "::1", "127.1.2.3", "[::1]"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "192.168.1.4", "::", "example.org"))


async def _hello(scope: dict, receive, send) -> None:  # a minimal ASGI app
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


async def _get(port: int) -> str:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    data = await reader.read()
    writer.close()
    return data.decode()


def test_what_the_first_request_would_load_is_loaded_at_start() -> None:
    """anyio loads its asyncio backend on first use (~40 ms, more beside Qt's import hook): at start,
    so that the first burst of requests does not wait behind an import. In a fresh interpreter:
    this one has long loaded it."""
    import pathlib
    import subprocess
    import sys

    code = ("import asyncio, sys\n"
            "from desktop.api.server import ApiServer\n"
            "async def app(scope, receive, send): pass\n"
            "async def main():\n"
            "    server = ApiServer(lambda key, local_only: app)\n"
            "    assert 'anyio._backends._asyncio' not in sys.modules\n"
            "    assert (await server.start('127.0.0.1', 0)).port\n"
            "    print('anyio._backends._asyncio' in sys.modules)\n"
            "    await server.stop()\n"
            "asyncio.run(main())\n")
    root = pathlib.Path(__file__).resolve().parents[2]  # this checkout's desktop package, not an installed one
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "True", out.stderr
