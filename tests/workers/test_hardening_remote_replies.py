"""Issue 19, items 5 and 9: remote replies that never ended, leaked their slot, or went on without
bound. Whatever a server streams (text that is a number or a list, an HTML page, one JSON answer,
random bytes, a body cut before its end, far more than max_tokens, absurd usage numbers), every
request ends with one terminal event, its slot is released, and what is taken is counted here."""

from __future__ import annotations

import json

import pytest
from hostile_server import SSE_HEAD, HostileServer, answer, chunk, end, stream, wait_for

from desktop.model.messages import Message
from desktop.model.params import SamplingParams
from desktop.protocol import Chat, ChunkEvent, Done, ErrorEvent, WorkerState, WorkerStatus
from desktop.workers.remote.host import RemoteHost
from desktop.workers.remote.outcome import CHARS_PER_TOKEN
from desktop.workers.remote.spec import RemoteSpec

pytestmark = pytest.mark.hardening

BAD = {
    "content is a number": stream(chunk("Hi"), chunk(5), end()),
    "content is a list": stream(chunk([{"type": "text", "text": "Hi"}]), end()),
    "delta is text": stream(b'data: {"choices":[{"delta":"Hi"}]}\n\n', end()),
    "usage is a list": stream(chunk("Hi", usage=[1, 2]), end()),
    "an HTML page": answer("<!DOCTYPE html>\n<html><body>Welcome to nginx!</body></html>\n", kind="text/html"),
    "one JSON completion": answer({"choices": [{"message": {"role": "assistant", "content": "Hi"}}]}),
    "random bytes": answer(bytes(range(256)) * 40, kind="application/octet-stream"),
    "cut before its end": stream(chunk("Hi"), chunk(" there")),
    "an empty body": stream(),
}


@pytest.fixture
def served():
    server = HostileServer()
    seen: list = []
    host = RemoteHost("r0", RemoteSpec(server.url), health_s=0.2, backoff=(0.1, 0.4), timeout_s=5.0, stall_s=(10.0, 10.0))
    host.start(lambda _w, e: seen.append(e))
    wait_for(lambda: any(isinstance(e, WorkerStatus) and e.state is WorkerState.IDLE for e in seen))
    yield server, host, seen
    host.close()
    server.close()


def ask(host: RemoteHost, seen: list, rid: str, max_tokens: int = 16) -> list:
    """Send a chat; its events, once its terminal one came (and nothing follows it)."""
    host.submit(Chat(rid, (Message("user", "Hello?"),), SamplingParams(max_tokens=max_tokens)))
    mine = lambda: [e for e in seen if getattr(e, "request_id", None) == rid and not isinstance(e, WorkerStatus)]  # noqa: E731
    wait_for(lambda: any(isinstance(e, (Done, ErrorEvent)) for e in mine()))
    events = mine()
    assert sum(isinstance(e, (Done, ErrorEvent)) for e in events) == 1 and isinstance(events[-1], (Done, ErrorEvent))
    assert all(isinstance(e.text_delta, str) for e in events if isinstance(e, ChunkEvent))
    return events


@pytest.mark.parametrize("kind", list(BAD))
def test_a_reply_of_the_wrong_kind_is_an_error_that_says_so(served, kind):
    server, host, seen = served
    server.routes["/v1/chat/completions"] = BAD[kind]
    events = ask(host, seen, "bad")
    last = events[-1]
    assert isinstance(last, ErrorEvent) and last.code == "remote_error", last
    assert "cannot be read" in last.message and server.url in last.message, last.message
    assert "Traceback" not in last.message
    assert not any(s.busy for s in host.slots.slots)


def test_five_bad_replies_in_a_row_then_a_good_one_is_still_served(served):
    """Four slots: before, four replies that never ended held them all and every chat was "busy"."""
    server, host, seen = served
    assert len(host.slots.slots) == 4
    kinds = ["content is a number", "content is a list", "delta is text", "content is a number", "usage is a list"]
    for i, kind in enumerate(kinds):
        server.routes["/v1/chat/completions"] = BAD[kind]
        assert isinstance(ask(host, seen, f"bad{i}")[-1], ErrorEvent)
    server.routes["/v1/chat/completions"] = stream(chunk("Hi"), end())
    last = ask(host, seen, "good")[-1]
    assert isinstance(last, Done) and last.text == "Hi", last


def test_a_server_that_ignores_max_tokens_is_stopped_here(served):
    server, host, seen = served
    server.routes["/v1/chat/completions"] = server.flood(SSE_HEAD, chunk("tok"), 50 << 20)
    events = ask(host, seen, "long", max_tokens=16)
    last = events[-1]
    assert isinstance(last, Done), last
    assert len([e for e in events if isinstance(e, ChunkEvent)]) == 16 and last.text == "tok" * 16
    assert last.stats.finish_reason == "length" and last.stats.generated_tokens == 16
    wait_for(lambda: server.hung_up == 1)  # the connection was closed, which stops the server's work
    assert server.sent < 40 << 20


def test_huge_pieces_are_cut_to_what_max_tokens_can_hold(served):
    server, host, seen = served
    server.routes["/v1/chat/completions"] = stream(*[chunk("y" * 200_000)] * 40, end())
    last = ask(host, seen, "wide", max_tokens=16)[-1]
    assert isinstance(last, Done), last
    assert len(last.text) == 16 * CHARS_PER_TOKEN and last.stats.finish_reason == "length"


@pytest.mark.parametrize("usage, timings", [
    ({"prompt_tokens": -5, "completion_tokens": 10**30}, {}),
    ({"prompt_tokens": 1e30, "completion_tokens": -1, "prompt_tokens_details": {"cached_tokens": 10**40}}, {}),
    ({}, {"prompt_n": -7, "cache_n": 1e999, "prompt_ms": -3.0, "predicted_ms": float("nan")}),
    ({"prompt_tokens": "12", "completion_tokens": 500}, {}),
])
def test_absurd_usage_numbers_never_reach_the_badge(served, usage, timings):
    server, host, seen = served
    last_line = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": usage, "timings": timings}
    tail = ("data: " + json.dumps(last_line) + "\n\ndata: [DONE]\n\n").encode()
    server.routes["/v1/chat/completions"] = stream(chunk("a"), chunk("b"), tail)
    last = ask(host, seen, "odd", max_tokens=16)[-1]
    assert isinstance(last, Done), last
    stats = last.stats
    assert 0 <= stats.cached_tokens <= stats.input_tokens <= 10**7, stats
    assert stats.generated_tokens == 2, stats  # what was counted here
    assert 0 <= stats.prefill_ms < 1e9 and 0 <= stats.decode_ms < 1e9 and stats.decode_ms == stats.decode_ms


def test_endless_chunks_without_text_end_at_the_budget(served):
    """Empty deltas (or a reasoning stream this side does not show) past max_tokens: stopped here."""
    server, host, seen = served
    server.routes["/v1/chat/completions"] = server.flood(SSE_HEAD, b'data: {"choices":[{"delta":{}}]}\n\n', 50 << 20)
    last = ask(host, seen, "empty", max_tokens=16)[-1]
    assert isinstance(last, Done) and last.text == "" and last.stats.finish_reason == "length", last
    wait_for(lambda: server.hung_up == 1)


def test_endless_keep_alive_comments_are_no_progress(served):
    """Comments forever keep no request open: the stall window runs on through them."""
    server, host, seen = served
    server.routes["/v1/chat/completions"] = server.flood(SSE_HEAD, b": ping\n\n", 2 << 30, pause=0.01)
    host.stall_s = (1.0, 1.0)
    last = ask(host, seen, "pings", max_tokens=16)[-1]
    assert isinstance(last, ErrorEvent) and last.code == "remote_stalled", last
