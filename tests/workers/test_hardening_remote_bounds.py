"""Issue 19, item 3: remote workers that grew the app without bound. Every read of a server is
bounded (a line of its event stream, an error body, /props and /v1/models) and an absurd slot
count is refused with a clear reason, measured as bytes read and held, not as RSS."""

from __future__ import annotations

import gzip

import pytest
from hostile_server import SSE_HEAD, HostileServer, answer, wait_for

from desktop.model.messages import Message
from desktop.model.params import SamplingParams
from desktop.protocol import Chat, Done, ErrorEvent, WorkerState, WorkerStatus
from desktop.workers.remote import host as host_module
from desktop.workers.remote.host import RemoteHost
from desktop.workers.remote.reading import ERROR_BODY_LIMIT, LINE_LIMIT
from desktop.workers.remote.spec import RemoteSpec

pytestmark = pytest.mark.hardening
MiB = 1 << 20
FLOOD = 96 * MiB  # what a hostile server would send; the client must stop long before


@pytest.fixture
def server():
    s = HostileServer()
    yield s
    s.close()


def started(server: HostileServer) -> tuple[RemoteHost, list]:
    seen: list = []
    host = RemoteHost("r0", RemoteSpec(server.url), health_s=0.2, backoff=(0.1, 0.4), timeout_s=5.0, stall_s=(10.0, 10.0))
    host.start(lambda _w, e: seen.append(e))
    wait_for(lambda: any(isinstance(e, WorkerStatus) and e.state is not WorkerState.LOADING for e in seen))
    return host, seen


def ask(host: RemoteHost, seen: list, rid: str, max_tokens: int = 16):
    host.submit(Chat(rid, (Message("user", "Hello?"),), SamplingParams(max_tokens=max_tokens)))
    wait_for(lambda: any(isinstance(e, (Done, ErrorEvent)) and e.request_id == rid for e in seen), 60)
    return next(e for e in seen if isinstance(e, (Done, ErrorEvent)) and e.request_id == rid)


def test_a_stream_without_line_breaks_is_cut_at_the_line_limit(server, monkeypatch):
    held: list = []

    class Watched(host_module.Lines):  # the host's line reader, remembered to read its peak
        def __init__(self, resp, limit=None) -> None:
            super().__init__(resp, limit)
            held.append(self)

    monkeypatch.setattr(host_module, "Lines", Watched)
    server.routes["/v1/chat/completions"] = server.flood(SSE_HEAD + b"data: ", b"x" * 65536, FLOOD)
    host, seen = started(server)
    try:
        end = ask(host, seen, "flood")
        assert isinstance(end, ErrorEvent) and "without a line break" in end.message, end
        assert server.url in end.message and "Traceback" not in end.message
        assert held and held[0].peak <= LINE_LIMIT
        wait_for(lambda: server.hung_up == 1)
        assert server.sent < 32 * MiB, server.sent  # the rest sat in socket buffers at most
        server.routes["/v1/chat/completions"] = HostileServer().routes["/v1/chat/completions"]
        assert isinstance(ask(host, seen, "next"), Done)  # the worker serves on
    finally:
        host.close()


def test_a_huge_error_body_is_read_only_to_its_first_words(server):
    head = b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nthe GPU caught fire\n"
    server.routes["/v1/chat/completions"] = server.flood(head, b"e" * 65536, FLOOD)
    host, seen = started(server)
    try:
        end = ask(host, seen, "loud")
        assert isinstance(end, ErrorEvent) and "the GPU caught fire" in end.message, end
        assert len(end.message) < 1000
        wait_for(lambda: server.hung_up == 1)
        assert server.sent < ERROR_BODY_LIMIT + 32 * MiB, server.sent
    finally:
        host.close()


@pytest.mark.parametrize("path, body, said", [
    ("/props", {"default_generation_settings": {"n_ctx": 4096}, "total_slots": 10**6}, "total_slots"),
    ("/props", {"default_generation_settings": {"n_ctx": 4096}, "total_slots": 100_000}, "total_slots"),
    ("/props", {"default_generation_settings": {"n_ctx": 4096}, "pad": "x" * (5 * MiB)}, "longer than 4 MiB"),
    ("/v1/models", {"data": [{"id": "m"}], "pad": "x" * (5 * MiB)}, "longer than 4 MiB"),
])
def test_absurd_or_huge_server_answers_are_refused_with_the_reason(server, path, body, said):
    server.routes[path] = answer(body)
    host, seen = started(server)
    try:
        status = next(e for e in seen if isinstance(e, WorkerStatus) and e.state is not WorkerState.LOADING)
        assert status.state is WorkerState.ERROR and status.code == "remote_unusable", status
        assert said in status.message and server.url in status.message, status.message
        assert len(host.slots.slots) <= 256  # no slot table built from the absurd count
    finally:
        host.close()


def test_a_compressed_answer_is_refused_not_inflated(server):
    """Asked for identity, a gzip body (a possible bomb) is not inflated: the worker is unusable."""
    server.routes["/v1/models"] = answer(gzip.compress(b'{"data": [{"id": "m"}]}' + b" " * MiB), extra="Content-Encoding: gzip\r\n")
    host, seen = started(server)
    try:
        status = next(e for e in seen if isinstance(e, WorkerStatus) and e.state is not WorkerState.LOADING)
        assert status.code == "remote_unusable" and "compressed" in status.message, status
    finally:
        host.close()
