"""Remote workers without a server: address validation, the request body, SSE lines as llama.cpp
and vLLM send them, the slot table that keeps a conversation on the slot that caches it, and a
host whose server is not there (unreachable, requests fail at once, close is quick)."""

from __future__ import annotations

import json
import socket
import time

import pytest

from desktop.model.messages import Message, history_hash
from desktop.model.params import SamplingParams
from desktop.protocol import Chat, ErrorEvent, WorkerState, WorkerStatus
from desktop.workers.remote.host import UNREACHABLE, RemoteHost
from desktop.workers.remote.slots import RemoteSlots
from desktop.workers.remote.spec import RemoteSpec, check_url
from desktop.workers.remote.wire import body_error, chat_body, parse_line


@pytest.mark.parametrize("raw, url", [
    ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
    ("127.0.0.1:8080/", "http://127.0.0.1:8080"),
    (" https://gpu.lan/v1 ", "https://gpu.lan"),
    ("http://gpu.lan:8000/v1/chat/completions", "http://gpu.lan:8000"),
    ("http://host/proxy/llm/v1/", "http://host/proxy/llm"),
    ("http://[::1]:9000", "http://[::1]:9000"),
])
def test_addresses_are_normalised(raw, url):
    assert check_url(raw) == url


@pytest.mark.parametrize("raw, why", [
    ("", "enter the server"), ("ftp://host", "http:// or https://"), ("http://", "no host"),
    ("http://host:99999", "not a valid address"), ("http://host/?a=1", "without spaces"),
])
def test_bad_addresses_are_refused_in_words(raw, why):
    with pytest.raises(ValueError, match=why):
        check_url(raw)


def test_the_key_is_sent_as_a_bearer_token_and_never_shown():
    spec = RemoteSpec("http://h:1", api_key="sk-secret ")
    assert spec.headers == {"Authorization": "Bearer sk-secret"}
    assert "sk-secret" not in repr(spec) and RemoteSpec("http://h:1").headers == {}
    with pytest.raises(ValueError, match="one line"):
        RemoteSpec("http://h:1", model="a\nb")


def test_the_body_names_the_slot_only_for_llamacpp_and_maps_sampling():
    msgs = (Message("user", "hi"),)
    p = SamplingParams(max_tokens=0, temperature=0.5, top_k=20, repetition_penalty=1.1, seed=2**40 + 3, stop=("x",))
    body = chat_body(msgs, p, "m", slot=1)
    assert body["messages"] == [{"role": "user", "content": "hi"}] and body["stream"] is True
    assert body["max_tokens"] == 1 and body["model"] == "m" and body["top_k"] == 20 and body["stop"] == ["x"]
    assert body["repeat_penalty"] == body["repetition_penalty"] == 1.1 and body["seed"] == 3
    assert body["id_slot"] == 1 and body["cache_prompt"] is True
    plain = chat_body(msgs, SamplingParams(), "", slot=None)
    assert "id_slot" not in plain and "model" not in plain and "repeat_penalty" not in plain and "seed" not in plain


def test_llamacpp_lines_carry_text_and_its_own_accounting():
    chunk = {"choices": [{"delta": {"content": "Hé"}, "finish_reason": None}],
             "timings": {"cache_n": 31, "prompt_n": 15, "prompt_ms": 107.6, "predicted_ms": 85.3}}
    piece = parse_line("data: " + json.dumps(chunk))
    assert piece.delta == "Hé" and piece.prompt_tokens == 46 and piece.cached_tokens == 31
    assert piece.prompt_ms == 107.6 and piece.decode_ms == 85.3
    usage = {"choices": [], "usage": {"completion_tokens": 8, "prompt_tokens": 46,
                                      "prompt_tokens_details": {"cached_tokens": 30}}}
    last = parse_line("data: " + json.dumps(usage))
    assert (last.prompt_tokens, last.cached_tokens, last.completion_tokens) == (46, 30, 8)  # usage wins
    assert parse_line("data: [DONE]").done and parse_line("") is None and parse_line(": ping") is None


def test_vllm_usage_without_cache_details_and_errors_in_the_stream():
    piece = parse_line('data: {"choices":[{"delta":{},"finish_reason":"length"}],"usage":{"prompt_tokens":9,"completion_tokens":2}}')
    assert piece.finish_reason == "length" and piece.prompt_tokens == 9 and piece.cached_tokens is None
    err = parse_line('error: {"code":500,"message":"the slot was lost","type":"server_error"}')
    assert err.error == "the slot was lost"
    assert parse_line('data: {"error":{"message":"bad"}}').error == "bad"
    assert "not JSON" in parse_line("data: {oops").bad
    assert body_error(b'{"error":{"code":400,"message":"context too long"}}') == "context too long"
    assert body_error(b"Bad Gateway\nmore") == "Bad Gateway"


def convo(*texts: str) -> tuple[Message, ...]:
    roles = ("user", "assistant")
    return tuple(Message(roles[i % 2], t) for i, t in enumerate(texts))


def test_a_turn_goes_to_the_slot_holding_the_longest_prefix_of_its_conversation():
    now = [0.0]
    slots = RemoteSlots(3, clock=lambda: now[0])
    first = convo("a")
    assert slots.for_chat(first) == (0, False)  # an empty slot
    slots.hold(0)
    assert slots.for_chat(convo("b")) == (1, False)  # 0 is busy
    slots.release(0, first + (Message("assistant", "A"),), tokens=12)
    second = convo("a", "A", "more")
    assert history_hash(second) in slots.snapshot()[0].hashes  # what the gateway routes by
    assert slots.for_chat(second) == (0, True)
    longer = convo("a", "A", "more", "B", "again")  # holds only a prefix of it: still the best slot
    assert slots.for_chat(longer) == (0, False)
    for i in (1, 2):
        now[0] += 1
        slots.hold(i)
        slots.release(i, convo(str(i), "x"), tokens=5)
    assert slots.for_chat(convo("new")) == (0, False)  # no prefix anywhere: least recently used


def test_sessions_own_their_slot_until_they_end():
    slots = RemoteSlots(2)
    assert slots.for_session("s1") == 0 and slots.for_session("s2") == 1
    assert slots.for_session("s3") is None and slots.for_chat(convo("a")) is None
    snap = slots.snapshot()
    assert [s.state for s in snap] == ["session", "session"] and snap[1].session_id == "s2"
    assert slots.end_session("s1") and not slots.end_session("s1")
    assert slots.for_chat(convo("a")) == (0, False)
    slots.hold(1)
    slots.release(1, None)  # a failed request: nothing reusable is known to be there
    assert slots.snapshot()[1].hashes == () and slots.snapshot()[1].tokens == 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again: nothing listens there


def test_a_server_that_is_not_there_is_reported_unreachable_and_requests_fail_at_once():
    url = f"http://127.0.0.1:{free_port()}"
    seen: list = []
    host = RemoteHost("r0", RemoteSpec(url), health_s=0.2, backoff=(0.05, 0.2), timeout_s=1.0)
    host.start(lambda _w, e: seen.append(e))
    end = time.monotonic() + 10
    while not any(isinstance(e, WorkerStatus) and e.state is WorkerState.ERROR for e in seen):
        assert time.monotonic() < end
        time.sleep(0.02)
    first, down = seen[0], seen[-1]
    assert first.state is WorkerState.LOADING and url in first.message
    assert down.code == UNREACHABLE and down.message.startswith(f"unreachable: {url} does not answer (connection refused")
    host.submit(Chat("c", (Message("user", "hi"),)))
    while not any(isinstance(e, ErrorEvent) for e in seen):
        assert time.monotonic() < end
        time.sleep(0.02)
    err = next(e for e in seen if isinstance(e, ErrorEvent))
    assert err.request_id == "c" and err.code == UNREACHABLE and url in err.message and err.retryable
    statuses = sum(isinstance(e, WorkerStatus) for e in seen)
    time.sleep(0.5)  # checks go on quietly: no status again while nothing changes
    assert sum(isinstance(e, WorkerStatus) for e in seen) == statuses
    t0 = time.perf_counter()
    host.close()
    assert time.perf_counter() - t0 < 2.0


def test_close_right_after_start_does_not_hang():
    host = RemoteHost("r0", RemoteSpec(f"http://127.0.0.1:{free_port()}"))
    host.start(lambda _w, _e: None)
    t0 = time.perf_counter()
    host.close(timeout=5.0)
    assert time.perf_counter() - t0 < 2.0 and not host._thread.is_alive()
