"""The local API server's own CPU per streamed chat request, with no model and no openai client in
the way: a scripted gateway (each request: Queued, 20 queue moves, 8 content chunks, Done, as a
busy queue gives them) behind the real app and uvicorn on 127.0.0.1, and N raw-socket HTTP
clients at once in a child process, for R rounds. Measured: the server loop thread's CPU time ÷
requests (so the other process and the machine's other load are not in it), with the HTTP
parser uvicorn picked. The last line is JSON."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

KEY = "bench"
BODY = json.dumps({"model": "any", "messages": [{"role": "system", "content": "You are a helpful assistant."},
                                                {"role": "user", "content": "Question 1: tell me one fact about tea."}],
                   "max_tokens": 8, "temperature": 0, "seed": 1, "stream": True}).encode()


async def clients(port: int, n: int, rounds: int) -> None:
    """The child process: n connections at once, each one streamed request read to its end."""
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
            f"authorization: Bearer {KEY}\r\ncontent-length: {len(BODY)}\r\n\r\n").encode()

    async def one() -> bool:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(head + BODY)
        data = b""
        while not data.endswith(b"0\r\n\r\n"):
            part = await reader.read(65536)
            if not part:
                break
            data += part
        writer.close()
        return b"data: [DONE]" in data

    ok = 0
    for _ in range(rounds):
        ok += sum(await asyncio.gather(*(one() for _ in range(n))))
    print(json.dumps({"ok": ok}), flush=True)


class Scripted:
    """One request's events as a busy gateway sends them."""

    def __init__(self, rid: str) -> None:
        from desktop.protocol import ChunkEvent, Done, Queued, QueueUpdate, TokenStats

        self.request_id = rid
        self._events = ([Queued(rid, 20, 2.0)] + [QueueUpdate(rid, 19 - i, 2.0) for i in range(20)]
                        + [ChunkEvent(rid, f" word{i}") for i in range(8)]
                        + [Done(rid, "", TokenStats(finish_reason="length"))])

    def __aiter__(self) -> Scripted:
        return self

    async def __anext__(self) -> Any:
        if not self._events:
            raise StopAsyncIteration
        await asyncio.sleep(0)  # each event in its own turn of the loop, as the gateway's arrive
        return self._events.pop(0)

    async def aclose(self) -> None:
        self._events = []


class ScriptedGateway:
    def __init__(self) -> None:
        self.count = 0

    def chat(self, messages: Any, params: Any, origin: str = "app") -> Scripted:
        self.count += 1
        return Scripted(f"r{self.count}")


async def serve(n: int, rounds: int) -> dict[str, Any]:
    from desktop.api.app import Engine, make_app
    from desktop.api.metrics import Metrics
    from desktop.api.server import ApiServer, ApiState

    metrics = Metrics()
    server = ApiServer(lambda key, local: make_app(lambda: Engine(ScriptedGateway(), "any"), key=key, local_only=local,
                                                   metrics=metrics))
    status = await server.start("127.0.0.1", 0, KEY)
    assert status.state is ApiState.LISTENING, status
    try:
        cpu, wall = time.thread_time(), time.monotonic()
        proc = await asyncio.create_subprocess_exec(sys.executable, __file__, "--clients-of", str(status.port),
                                                    "--clients", str(n), "--rounds", str(rounds),
                                                    stdout=asyncio.subprocess.PIPE)
        out, _ = await proc.communicate()
        cpu, wall = time.thread_time() - cpu, time.monotonic() - wall
    finally:
        await server.stop()
    ok = json.loads(out.decode().splitlines()[-1])["ok"]
    return {"clients": n, "rounds": rounds, "ok": ok, "lost": n * rounds - ok,
            "http": "httptools" if "httptools" in sys.modules else "h11",
            "server_cpu_ms_per_request": round(1000 * cpu / (n * rounds), 3), "wall_s": round(wall, 2)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--clients-of", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.clients_of:
        asyncio.run(clients(args.clients_of, args.clients, args.rounds))
        return
    import PySide6.QtCore  # noqa: F401 - as in the app (its import hook is on every later import)

    print(json.dumps(asyncio.run(serve(args.clients, args.rounds))))


if __name__ == "__main__":
    main()
