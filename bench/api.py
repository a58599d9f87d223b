"""The local API's cost: N concurrent streaming clients (the official openai client, in a separate
process, as real clients are) through the API vs the same N requests straight into the gateway,
in one run, on the embedded default model as the app runs it (or `--model tiny`).

Measured per request:
- ttft: request sent → first content token received. Direct: gateway.chat() called → first
  ChunkEvent out of its stream. API: the client's create() called → first content delta parsed.
- api_overhead_ms: what the HTTP layer adds to one request's TTFT, end to end: the client's TTFT
  minus the TTFT of the same request inside the server (its handler's gateway.chat() call → the
  first ChunkEvent there); queueing and the model are in both terms and cancel out. It holds the
  openai client's own work too (building the request, parsing the reply: in the client process,
  on the same cores), so it is also cut at each hand-over (`overhead_parts_ms_p50`, see
  overheads()) and its server-side share is reported alone:
- api_server_ms: the part of api_overhead_ms spent in the server, stamped on the server's side:
  uvicorn got the request's first bytes → the handler calls gateway.chat (less any wait for the
  body's bytes still on their way from the client), plus the gateway's first token → the SSE
  bytes carrying it written to the socket.
- loop_cpu_ms_per_request: CPU time of the server's event-loop thread during each burst ÷ N,
  through the API and direct (the difference is the API's work; the model's own thread or
  process is not in it).
- lost: requests that never ended properly (no finish chunk and [DONE], an exception, no Done).

Three runs, each through the API and straight into the gateway on the same schedule:
- `spaced`: the N requests are concurrent (`in_flight_max` shows all N streams open at once) and
  arrive `--spacing-ms` apart (10 ms: all 50 within half a second, long before the first
  finishes), as requests from separate programs do. Its end-to-end api_overhead_ms_p50, the
  openai client's own work included, is the number compared with the issue's target (≤ 5 ms at
  the median): `target` in the JSON.
- burst (the top-level keys): all N sent in the same millisecond, the worst case. Its end-to-end
  overhead is mostly the client process building 50 requests in turn (≈1.3 ms of CPU each), and
  its server share is 50 requests read in turn by the one event loop the API shares with the app
  (≈0.4 ms each before the gateway has it); both are shown, never hidden.
- `_idle`: requests sent one at a time after them.

Then the two-turn remote test (bench/remote.py): a conversation through a remote llama.cpp worker
(one started here on 127.0.0.1 with the embedded GGUF, or yours with `--remote URL`;
`--no-remote` skips it), `remote_cached_tokens_turn2` from the server's own accounting. The last
line is JSON."""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import gc
import json
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

SYSTEM = "You are a helpful assistant. Answer in one or two short sentences."
TOPICS = ("tea", "bicycles", "rain", "maps", "bread", "owls", "clocks", "rivers", "chess", "glass")


def requests(n: int) -> list[list[dict[str, str]]]:
    """N single-turn conversations with a shared system prompt (as many agents send)."""
    return [[{"role": "system", "content": SYSTEM},
             {"role": "user", "content": f"Question {i}: tell me one fact about {TOPICS[i % len(TOPICS)]}."}]
            for i in range(n)]


async def arrive(at: float) -> None:
    """Wait until monotonic time `at` (not at all once it has passed)."""
    if at > time.monotonic():
        await asyncio.sleep(at - time.monotonic())


def in_flight_max(spans: list[tuple[float, float]]) -> int:
    """The most requests open at one time (each span: sent → ended)."""
    edges = sorted([(t0, 1) for t0, _ in spans] + [(t1, -1) for _, t1 in spans])
    best = now = 0
    for _, step in edges:
        now += step
        best = max(best, now)
    return best


def pct(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (None for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, max(0, -(-q * len(ordered) // 100) - 1))], 2)


# ---------------------------------------------------------------------------------- the clients


async def clients(url: str, n: int, max_tokens: int, one_by_one: bool, spacing: float) -> None:
    """Client side (a separate process): N streaming openai clients, all at once (spacing 0), the
    i-th `i * spacing` s after the first, or one by one; one JSON line each."""
    import httpx
    from openai import AsyncOpenAI

    sent: dict[int, float] = {}
    written: dict[int, float] = {}

    def http(i: int) -> httpx.AsyncClient:
        async def trace(name: str, info: dict[str, Any]) -> None:  # httpcore's trace extension
            if name == "http11.send_request_headers.started":
                written.setdefault(i, time.monotonic())

        async def hook(request: httpx.Request) -> None:
            sent.setdefault(i, time.monotonic())
            request.extensions["trace"] = trace
        return httpx.AsyncClient(timeout=600, event_hooks={"request": [hook]})

    pool = [AsyncOpenAI(base_url=f"{url}/v1", api_key="bench", max_retries=0, http_client=http(i)) for i in range(n)]
    start, origin = asyncio.Event(), [0.0]  # origin: when request 0 goes

    async def one(i: int, client: AsyncOpenAI, messages: list[dict[str, str]]) -> dict[str, Any]:
        await start.wait()
        await arrive(origin[0] + i * spacing)
        row: dict[str, Any] = {"i": i, "ok": False}
        t0 = time.monotonic()
        try:
            stream = await client.chat.completions.create(model="any", messages=messages, max_tokens=max_tokens,
                                                          temperature=0, seed=1, stream=True)
            finish = None
            async for chunk in stream:
                row["id"] = chunk.id
                if chunk.choices and chunk.choices[0].delta.content and "t_first" not in row:
                    row["t_first"] = time.monotonic()
                if chunk.choices and chunk.choices[0].finish_reason:
                    finish = chunk.choices[0].finish_reason
            row.update(ok=finish is not None, t_end=time.monotonic())
        except Exception as exc:  # noqa: BLE001 - counted as lost, with the reason
            row["error"] = f"{type(exc).__name__}: {exc}"
        row["t0"], row["t_sent"], row["t_written"] = t0, sent.get(i, t0), written.get(i)
        return row

    if one_by_one:
        cpu = time.process_time()
        start.set()
        rows = [await one(i, c, m) for i, (c, m) in enumerate(zip(pool, requests(n)))]
    else:
        tasks = [asyncio.ensure_future(one(i, c, m)) for i, (c, m) in enumerate(zip(pool, requests(n)))]
        await asyncio.sleep(0.2)  # every client is waiting on the same start
        cpu, origin[0] = time.process_time(), time.monotonic()
        start.set()
        rows = await asyncio.gather(*tasks)
    for row in rows:
        print(json.dumps(row), flush=True)
    print(json.dumps({"cpu_s": time.process_time() - cpu}), flush=True)  # the clients' CPU from the start to the end
    for c in pool:
        await c.close()


# ---------------------------------------------------------------------------------- the server side


STAMPS: contextvars.ContextVar[dict[str, float] | None] = contextvars.ContextVar("stamps", default=None)
ARRIVED: dict[int, list[float]] = {}  # client port → when uvicorn's protocol got bytes on that connection


def stamp_arrivals() -> None:
    """Note when each connection's first bytes reach uvicorn's protocol (bench only: its
    data_received, wrapped on the class)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    classes = [H11Protocol]
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
        classes.append(HttpToolsProtocol)
    except ImportError:
        pass
    for cls in classes:
        def data_received(self: Any, data: bytes, _inner: Any = cls.data_received) -> None:
            if self.client:
                ARRIVED.setdefault(self.client[1], []).append(time.monotonic())
            _inner(self, data)
        cls.data_received = data_received


class Stamped:
    """ASGI wrapper (bench only): stamps, per chat request, when the app was called (the request's
    headers parsed by uvicorn) and when the SSE bytes carrying the first token were written to the
    socket (uvicorn's send returns once they are in the transport)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("path") != "/v1/chat/completions":
            return await self.app(scope, receive, send)
        stamps = {"app": time.monotonic()}
        arrivals = ARRIVED.get(scope["client"][1], []) if scope.get("client") else []
        if arrivals:
            stamps["arrived"] = arrivals[0]
        STAMPS.set(stamps)

        async def received() -> dict:
            message = await receive()
            if message["type"] == "http.request" and not message.get("more_body"):
                stamps.setdefault("body", time.monotonic())
                stamps.setdefault("body_in", arrivals[-1] if arrivals else stamps["app"])
            return message

        async def stamped(message: dict) -> None:
            await send(message)
            if "first" in stamps and "written" not in stamps and message["type"] == "http.response.body":
                stamps["written"] = time.monotonic()

        try:
            await self.app(scope, received, stamped)
        finally:
            if scope.get("client"):
                ARRIVED.pop(scope["client"][1], None)


class TimedStream:
    """A gateway stream that notes when its first ChunkEvent came out (inside the server)."""

    def __init__(self, stream: Any, stamps: dict[str, float]) -> None:
        self.request_id, self._stream, self._stamps = stream.request_id, stream, stamps

    def __aiter__(self) -> TimedStream:
        return self

    async def __anext__(self) -> Any:
        from desktop.protocol import ChunkEvent

        event = await self._stream.__anext__()
        if "first" not in self._stamps and isinstance(event, ChunkEvent) and event.text_delta:
            self._stamps["first"] = time.monotonic()
        return event

    async def aclose(self) -> None:
        await self._stream.aclose()


class TimedGateway:
    """The gateway as the API's handler sees it: notes when chat() was called, per request id."""

    def __init__(self, gateway: Any) -> None:
        self.gateway, self.marks = gateway, {}

    def chat(self, *args: Any, **kw: Any) -> TimedStream:
        stamps = STAMPS.get()
        stamps = {} if stamps is None else stamps
        stamps["call"] = time.monotonic()
        stream = self.gateway.chat(*args, **kw)
        self.marks[stream.request_id] = stamps
        return TimedStream(stream, stamps)

    def __getattr__(self, name: str) -> Any:  # the rest of the gateway as it is (stats, context_length, …)
        return getattr(self.gateway, name)


async def direct(gateway: Any, n: int, max_tokens: int, spacing: float = 0.0) -> list[dict[str, Any]]:
    """The same N requests straight into the gateway, on the same arrival schedule as the clients."""
    from desktop.protocol import ChunkEvent, Done
    from desktop.model.params import SamplingParams

    params = SamplingParams(max_tokens=max_tokens, temperature=0.0, seed=1)
    origin = time.monotonic()

    async def one(i: int, messages: list[dict[str, str]]) -> dict[str, Any]:
        await arrive(origin + i * spacing)
        row: dict[str, Any] = {"ok": False}
        t0 = row["t0"] = time.monotonic()
        try:
            async for event in gateway.chat(messages, params):
                if isinstance(event, ChunkEvent) and event.text_delta and "ttft_ms" not in row:
                    row["ttft_ms"] = 1000 * (time.monotonic() - t0)
                if isinstance(event, Done):
                    row["ok"] = True
            row["t_end"] = time.monotonic()
            row["total_ms"] = 1000 * (row["t_end"] - t0)
        except Exception as exc:  # noqa: BLE001
            row["error"] = f"{type(exc).__name__}: {exc}"
        return row

    return list(await asyncio.gather(*(one(i, m) for i, m in enumerate(requests(n)))))


def make_gateway(model: str) -> Any:
    from desktop.composition import worker_cores
    from desktop.gateway.gateway import Gateway
    from desktop.settings import Settings
    from desktop.workers.factory import make_hosts

    settings = Settings(model_source=model)
    hosts = make_hosts(settings.model_spec(), settings.worker_config(), 1, cores=worker_cores(), isolate=model != "tiny")
    return Gateway(hosts, queue_max=256)


async def through_api(url: str, n: int, max_tokens: int, one_by_one: bool, cores: Cores,
                      spacing: float = 0.0) -> tuple[list[dict[str, Any]], float | None]:
    """Run the clients' process against the server (serving on this loop meanwhile): each
    request's row, and the clients' CPU seconds from the start to the end."""
    cmd = [sys.executable, __file__, "--clients-of", url, "--clients", str(n), "--max-tokens", str(max_tokens),
           "--spacing-ms", str(1000 * spacing)]
    proc = await asyncio.create_subprocess_exec(*cmd, *(["--one-by-one"] if one_by_one else []), *cores.client_args(),
                                                stdout=subprocess.PIPE)
    out, _ = await proc.communicate()
    lines = [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]
    return [line for line in lines if "i" in line], next((round(line["cpu_s"], 2) for line in lines if "cpu_s" in line), None)


class Cores:
    """Where the work runs (`--pin`, on a machine with two cores or more): the server's event loop
    thread on the first core; every other thread of this process (the model's thread or the host's
    pipe threads), the model's worker process and the clients' process on the others. The clients
    stand for programs of their own; on the server's core, 50 of them building and parsing their
    requests (≈60 ms of CPU at once, see client_build and client_send) would take turns with the
    server, and the server's time would measure the OS sharing one core out. This is the load
    generator kept off the system under test, as a benchmark on two machines has it.
    The model's worker process also runs under SCHED_IDLE: it computes without pause (a whole core
    while requests wait), and at equal standing a client that wakes on the shared core (its turn
    to send, its reply's bytes) waits for the model's time slice to end, a few ms under EEVDF,
    which the overhead would charge to the API (a niceness of 5 still left the p99 at 45 ms).
    Under SCHED_IDLE any thread that wakes runs at once and the model has the core whenever
    nothing else wants it, in the direct and the API runs alike: the clients run as on a machine
    of their own, and their CPU still slows the model (the in-server TTFT shows it). `restore()`
    puts this process back as it was (the remote test after it is not pinned)."""

    def __init__(self, pin: bool) -> None:
        self.original = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
        cores = sorted(self.original)
        self.server, self.others = (set(cores[:1]), set(cores[1:])) if pin and len(cores) >= 2 else (set(), set())

    def apply(self) -> None:
        """Once the model is up: this thread on the server's core, all the rest on the others."""
        if not self.server:
            return
        import multiprocessing

        loop_thread = threading.get_native_id()
        self._set(os.getpid(), lambda tid: self.server if tid == loop_thread else self.others)
        for child in multiprocessing.active_children():
            self._set(child.pid, lambda tid: self.others, idle=True)

    def restore(self) -> None:
        if self.server:
            self._set(os.getpid(), lambda tid: self.original)

    @staticmethod
    def _set(pid: int, cores_of: Callable[[int], set[int]], idle: bool = False) -> None:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                os.sched_setaffinity(int(tid), cores_of(int(tid)))
                if idle:  # per thread (threads it starts later inherit it)
                    os.sched_setscheduler(int(tid), os.SCHED_IDLE, os.sched_param(0))
            except OSError:  # a thread that ended meanwhile
                pass

    def client_args(self) -> list[str]:
        """The clients' process pins itself first thing (no preexec_fn in a process with threads)."""
        return ["--cores", ",".join(map(str, sorted(self.others)))] if self.server else []

    def describe(self) -> dict[str, Any] | None:
        return ({"server_loop": sorted(self.server), "model_and_clients": sorted(self.others), "model": "SCHED_IDLE"}
                if self.server else None)


STAMPED = {"arrived", "app", "body_in", "body", "call", "first", "written"}  # a request's server-side stamps
SERVER_PARTS = ("server_read", "server_body", "server_app", "server_out")
PARTS = ("client_build", "client_send", "wire", "server_read", "body_wait", "server_body", "server_app", "server_out",
         "client_read")


def overheads(rows: list[dict[str, Any]], marks: dict[str, dict[str, float]]) -> dict[str, list[float]]:
    """Per API request (ms): ttft (at the client), overhead (client TTFT − in-server TTFT), and
    that overhead cut at each hand-over, in time order (one clock: CLOCK_MONOTONIC is system-wide):
    - client_build: create() called → httpx is handed the request (the openai client building it);
    - client_send: → httpx starts writing the request's head (connecting; in the client process,
      behind its other clients' work);
    - wire: → uvicorn's protocol gets the request's first bytes. Both processes are in it: the
      client's last write (one more turn of its loop), the kernel, and the bytes waiting while the
      server's loop is busy elsewhere;
    - server_read: → the ASGI app is called (uvicorn parses the request's head, starts its task);
    - body_wait: → the rest of the body reaches uvicorn, if it was not there yet (httpx writes the
      head and the body separately, with its loop's other work in between: the client's share);
    - server_body: → the app has the whole body (the server's loop getting back to the request);
    - server_app: → the handler calls gateway.chat (middleware, routing, checks);
    - server_out: the gateway's first token → the SSE bytes carrying it written to the socket;
    - client_read: → the openai client has parsed that delta.
    server = server_read + server_body + server_app + server_out: the API server's own time,
    stamped on the server's side only (the wire's share of a busy server loop is not in it)."""
    out: dict[str, list[float]] = {k: [] for k in ("ttft", "in_server", "overhead", "server", *PARTS)}
    for row in rows:
        if not (row.get("ok") and "t_first" in row):
            continue
        out["ttft"].append(1000 * (row["t_first"] - row["t0"]))
        mark = marks.get(row.get("id", "").removeprefix("chatcmpl-"), {})
        if not STAMPED <= mark.keys() or not row.get("t_written"):
            continue
        ms = {"client_build": row["t_sent"] - row["t0"], "client_send": row["t_written"] - row["t_sent"],
              "wire": mark["arrived"] - row["t_written"], "server_read": mark["app"] - mark["arrived"],
              "body_wait": max(0.0, mark["body_in"] - mark["app"]),
              "server_body": mark["body"] - max(mark["app"], mark["body_in"]),
              "server_app": mark["call"] - mark["body"],
              "server_out": mark["written"] - mark["first"], "client_read": row["t_first"] - mark["written"]}
        for k, v in ms.items():
            out[k].append(1000 * v)
        out["server"].append(1000 * sum(ms[k] for k in SERVER_PARTS))
        out["in_server"].append(1000 * (mark["first"] - mark["call"]))
        out["overhead"].append(1000 * ((row["t_first"] - row["t0"]) - (mark["first"] - mark["call"])))
    return out


def spaced_figures(api: dict[str, list[float]], api_rows: list[dict[str, Any]], direct_rows: list[dict[str, Any]],
                   spacing_ms: float) -> dict[str, Any]:
    """The spaced run: N concurrent streams whose requests arrive `spacing_ms` apart (as separate
    programs' requests do) rather than in the same millisecond; `in_flight_max` shows they were
    all open at once."""
    def spans(rows: list[dict[str, Any]]) -> list[tuple[float, float]]:
        return [(r["t0"], r["t_end"]) for r in rows if "t_end" in r]

    direct_ttft = [r["ttft_ms"] for r in direct_rows if r["ok"] and "ttft_ms" in r]
    return {"spacing_ms": spacing_ms, "in_flight_max_api": in_flight_max(spans(api_rows)),
            "in_flight_max_direct": in_flight_max(spans(direct_rows)),
            "api_overhead_ms_p50": pct(api["overhead"], 50), "api_overhead_ms_p99": pct(api["overhead"], 99),
            "api_server_ms_p50": pct(api["server"], 50), "overhead_parts_ms_p50": {k: pct(api[k], 50) for k in PARTS},
            "ttft_api_ms_p50": pct(api["ttft"], 50), "ttft_api_ms_p99": pct(api["ttft"], 99),
            "ttft_api_in_server_ms_p50": pct(api["in_server"], 50),
            "ttft_direct_ms_p50": pct(direct_ttft, 50), "ttft_direct_ms_p99": pct(direct_ttft, 99)}


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    from desktop.api.app import Engine, make_app
    from desktop.api.server import ApiServer, ApiState

    cores = Cores(args.pin)
    gw = make_gateway(args.model)
    await gw.start()
    if not await gw.wait_ready(900):
        raise SystemExit("The model did not load.")
    cores.apply()
    timed = TimedGateway(gw)
    stamp_arrivals()
    # The heap as the app keeps it (desktop/gc_policy.py): what exists once the model is up is
    # frozen, never scanned again. Else a full collection over torch and transformers (200-350
    # ms) lands in whichever burst happens to cross Python's threshold, API or direct.
    gc.collect()
    gc.freeze()
    server = ApiServer(lambda key, local_only: Stamped(make_app(lambda: Engine(timed, args.model), key=key,
                                                                local_only=local_only)))
    status = await server.start("127.0.0.1", 0)
    assert status.state is ApiState.LISTENING, status
    n = args.clients
    try:
        await direct(gw, 2, args.max_tokens)  # warm-up: first-call costs and the system prompt's cache
        t, cpu = time.monotonic(), time.thread_time()
        direct_rows = await direct(gw, n, args.max_tokens)
        direct_wall, direct_cpu = time.monotonic() - t, time.thread_time() - cpu
        cpu = time.thread_time()
        api_rows, api_client_cpu = await through_api(status.url, n, args.max_tokens, one_by_one=False, cores=cores)
        api_cpu = time.thread_time() - cpu
        spacing = args.spacing_ms / 1000
        spaced_direct = await direct(gw, n, args.max_tokens, spacing)
        spaced_rows, spaced_client_cpu = await through_api(status.url, n, args.max_tokens, one_by_one=False, cores=cores, spacing=spacing)
        idle_rows, _ = await through_api(status.url, args.idle, args.max_tokens, one_by_one=True, cores=cores)
    finally:
        await server.stop()
        await gw.close()
        cores.restore()
    burst, idle = overheads(api_rows, timed.marks), overheads(idle_rows, timed.marks)
    spaced = overheads(spaced_rows, timed.marks)
    ended = [r["t_end"] for r in api_rows if "t_end" in r]
    api_wall = max(ended) - min(r["t0"] for r in api_rows) if ended else 0.0  # first request sent → last ended
    direct_ttft = [r["ttft_ms"] for r in direct_rows if r["ok"] and "ttft_ms" in r]
    lost_api = 2 * n - sum(r["ok"] for r in api_rows + spaced_rows)
    lost_direct = 2 * n - sum(r["ok"] for r in direct_rows + spaced_direct)
    return {
        "model": args.model, "clients": n, "max_tokens": args.max_tokens, "quick": args.quick, "cores": cores.describe(),
        "lost": lost_api + lost_direct, "lost_api": lost_api, "lost_direct": lost_direct,
        "api_overhead_ms_p50": pct(burst["overhead"], 50), "api_overhead_ms_p99": pct(burst["overhead"], 99),
        "api_server_ms_p50": pct(burst["server"], 50), "api_server_ms_p99": pct(burst["server"], 99),
        "overhead_parts_ms_p50": {k: pct(burst[k], 50) for k in PARTS},
        "target": {"api_overhead_ms_p50_max": 5.0, "met": (pct(spaced["overhead"], 50) or math.inf) <= 5.0,
                   "compared": "spaced.api_overhead_ms_p50 (end to end, openai client included; N concurrent, "
                               "arriving spacing_ms apart); the same-millisecond burst is api_overhead_ms_p50"},
        "api_overhead_idle_ms_p50": pct(idle["overhead"], 50), "api_server_idle_ms_p50": pct(idle["server"], 50),
        "overhead_parts_idle_ms_p50": {k: pct(idle[k], 50) for k in PARTS},
        "spaced": spaced_figures(spaced, spaced_rows, spaced_direct, args.spacing_ms) | {"client_cpu_s": spaced_client_cpu},
        "client_cpu_s": api_client_cpu,
        "loop_cpu_ms_per_request": {"api": round(1000 * api_cpu / n, 3), "direct": round(1000 * direct_cpu / n, 3)},
        "ttft_api_ms_p50": pct(burst["ttft"], 50), "ttft_api_ms_p99": pct(burst["ttft"], 99),
        "ttft_api_in_server_ms_p50": pct(burst["in_server"], 50),
        "ttft_direct_ms_p50": pct(direct_ttft, 50), "ttft_direct_ms_p99": pct(direct_ttft, 99),
        "wall_api_s": round(api_wall, 2), "wall_direct_s": round(direct_wall, 2),
        "errors": sorted({r["error"] for r in api_rows + spaced_rows + idle_rows + direct_rows + spaced_direct
                          if "error" in r})[:3],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="default", help="default (the embedded model, as the app runs it) or tiny")
    p.add_argument("--quick", action="store_true", help="fewer tokens per reply (8 instead of 32)")
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--max-tokens", type=int, default=None)
    p.add_argument("--remote", default=None, metavar="URL",
                   help="an OpenAI-compatible server for the two-turn cache test (default: llama.cpp started here)")
    p.add_argument("--no-remote", action="store_true", help="skip the two-turn remote test")
    p.add_argument("--spacing-ms", type=float, default=10.0,
                   help="the spaced run: the i-th of the N concurrent requests sent i × this after the first")
    p.add_argument("--idle", type=int, default=10, help="requests sent one at a time after the burst")
    p.add_argument("--no-pin", dest="pin", action="store_false",
                   help="let the server share its core with the clients and the model (see Cores)")
    p.add_argument("--clients-of", default=None, help=argparse.SUPPRESS)  # the client process's mode
    p.add_argument("--one-by-one", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--cores", default=None, help=argparse.SUPPRESS)  # the client process's cores
    args = p.parse_args()
    args.max_tokens = args.max_tokens or (8 if args.quick else 32)
    if args.clients_of:
        if args.cores:
            os.sched_setaffinity(0, {int(c) for c in args.cores.split(",")})
        asyncio.run(clients(args.clients_of, args.clients, args.max_tokens, args.one_by_one, args.spacing_ms / 1000))
        return
    import torch

    torch.set_num_threads(1)  # this process's own torch (the tiny model's thread worker)
    result = asyncio.run(bench(args))
    if not args.no_remote:
        from remote import measure_remote  # bench/remote.py, beside this file

        remote = measure_remote(args.remote)
        result.update({"remote_url": remote["remote_url"], "remote_cached_tokens_turn2": remote.get("remote_cached_tokens_turn2"),
                       "remote": {k: v for k, v in remote.items() if k != "remote_url"}})
    print(json.dumps(result))


if __name__ == "__main__":
    main()
