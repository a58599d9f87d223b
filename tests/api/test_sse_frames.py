"""The SSE framing of a streamed reply, on a scripted gateway stream and a fake clock: which
frames go out, in which writes, and that the spliced content frames are the encoder's own bytes."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from desktop.api import schemas
from desktop.api.replies import QUEUE_NOTE_EVERY_S, ContentFrames, EventStream, _sse, reply_events
from desktop.protocol import ChunkEvent, Done, ErrorEvent, Queued, QueueDone, QueueUpdate, TokenStats

from api_helpers import run

CID, MODEL, CREATED = "chatcmpl-r1", "omni-model", 1700000000


class Scripted:
    """A gateway stream of fixed events; each event may move the fake clock first."""

    def __init__(self, script: list[tuple[float, Any]], clock: list[float]) -> None:
        self.request_id, self._script, self._clock, self.closed = "r1", list(script), clock, False

    def __aiter__(self) -> Scripted:
        return self

    async def __anext__(self) -> Any:
        if not self._script:
            raise StopAsyncIteration
        at, event = self._script.pop(0)
        self._clock[0] = at
        return event

    async def aclose(self) -> None:
        self.closed = True


def writes(script: list[tuple[float, Any]], include_usage: bool = False) -> tuple[list[bytes], Scripted]:
    clock = [0.0]
    stream = Scripted(script, clock)

    async def main() -> list[bytes]:
        return [w async for w in reply_events(stream, CID, MODEL, CREATED, include_usage, clock=lambda: clock[0])]
    return run(main()), stream


def frames(write: bytes) -> list[str]:
    """The SSE frames in one write: data payloads, or comments as they are."""
    out = []
    for frame in write.decode().split("\n\n")[:-1]:
        out.append(frame[len("data: "):] if frame.startswith("data: ") else frame)
    return out


def stats() -> TokenStats:
    return TokenStats(input_tokens=12, cached_tokens=8, generated_tokens=2, finish_reason="stop")


def test_queue_notes_go_at_once_then_at_most_one_per_interval() -> None:
    step = QUEUE_NOTE_EVERY_S
    script = [(0.0, Queued("r1", 9, 4.0))] + [(0.1 * step * i, QueueUpdate("r1", 9 - i, 3.0)) for i in range(1, 9)]
    script += [(1.5 * step, QueueUpdate("r1", 2, 1.0)), (1.6 * step, QueueUpdate("r1", 1, 1.0)),
               (1.7 * step, QueueDone("r1", 1700.0)), (1.8 * step, ChunkEvent("r1", "Hi")),
               (1.9 * step, Done("r1", "Hi", stats()))]
    out, stream = writes(script)
    notes = [f for w in out for f in frames(w) if f.startswith(":")]
    assert notes == [": queued, position 9, starts in about 4 s", ": queued, position 2, starts in about 1 s"]
    assert stream.closed


def test_the_role_goes_with_the_first_frame_and_the_end_in_one_write() -> None:
    out, _ = writes([(0.0, ChunkEvent("r1", "Hel")), (0.1, ChunkEvent("r1", "")), (0.2, ChunkEvent("r1", "lo")),
                     (0.3, Done("r1", "Hello", stats()))], include_usage=True)
    assert len(out) == 3, out  # role + "Hel", "lo", finish + usage + [DONE]
    first, second, last = (frames(w) for w in out)
    assert [json.loads(f)["choices"][0]["delta"] for f in first] == [{"role": "assistant", "content": ""},
                                                                     {"content": "Hel"}]
    assert json.loads(second[0])["choices"][0]["delta"] == {"content": "lo"}
    finish, usage, done = last
    assert json.loads(finish)["choices"][0]["finish_reason"] == "stop"
    assert json.loads(usage)["usage"]["prompt_tokens_details"]["cached_tokens"] == 8
    assert json.loads(usage)["choices"] == [] and done == "[DONE]"


def test_an_error_after_the_start_is_an_error_event_then_done() -> None:
    out, stream = writes([(0.0, ErrorEvent("r1", "worker_crashed", "The worker stopped.", True))])
    (write,) = out  # nothing had gone out: the role chunk comes with it
    role, error, done = frames(write)
    assert json.loads(role)["choices"][0]["delta"]["role"] == "assistant"
    assert json.loads(error)["error"] == {"message": "The worker stopped.", "type": "server_error", "param": None,
                                          "code": "worker_crashed"}
    assert done == "[DONE]" and stream.closed


def test_a_stream_that_ends_without_done_still_ends_the_events() -> None:
    out, _ = writes([])
    assert [frames(w) for w in out] == [[_sse(schemas.chunk(CID, MODEL, CREATED, {"role": "assistant", "content": ""}))
                                         .decode()[len("data: "):-2], "[DONE]"]]


@pytest.mark.parametrize("text", ["plain", 'quote " and \\ backslash', "new\nline\ttab", "é ü 中文 🙂",
                                  "\x00\x1f control", "\u2028\u2029", "<|im_end|>", "\x00text\x00"])
@pytest.mark.parametrize("model", ["omni-model", 'odd "name" \\ é', "\x00text\x00"])
def test_content_frames_are_the_encoders_own_bytes(text: str, model: str) -> None:
    expected = _sse(schemas.chunk(CID, model, CREATED, {"content": text}))
    assert ContentFrames(CID, model, CREATED).frame(text) == expected
    assert json.loads(expected[len("data: "):])["choices"][0]["delta"]["content"] == text


def test_the_done_frame_ends_the_body_in_the_same_message() -> None:
    async def main() -> list[dict]:
        clock = [0.0]
        stream = Scripted([(0.0, ChunkEvent("r1", "Hi")), (0.1, Done("r1", "Hi", stats()))], clock)
        response = EventStream(reply_events(stream, CID, MODEL, CREATED, False, clock=lambda: clock[0]))
        sent: list[dict] = []

        async def receive() -> dict:
            await asyncio.sleep(60)  # the client never hangs up
            return {"type": "http.disconnect"}

        async def send(message: dict) -> None:
            sent.append(message)
        await response({"type": "http", "asgi": {"spec_version": "2.3"}}, receive, send)
        return sent

    start, *bodies = run(main())
    assert dict(start["headers"])[b"content-type"] == b"text/event-stream; charset=utf-8"
    assert [m["more_body"] for m in bodies] == [True, False]  # no empty message after [DONE]
    assert bodies[-1]["body"].endswith(b"data: [DONE]\n\n")
