"""Bad input gets a clear error event (never a traceback) and loses nothing already cached."""

from __future__ import annotations

import pytest
from worker_helpers import chat, make_client

from desktop.protocol import AppendInput, Chat, CreateSession, Done, EndSession, ErrorEvent, Generate, Stop
from desktop.errors import InvalidRequest
from desktop.model.messages import Message, parse_messages
from desktop.model.params import SamplingParams


def error_of(client, cmd) -> ErrorEvent:
    event = client.run(cmd)[-1]
    assert isinstance(event, ErrorEvent), event
    assert event.message and "Traceback" not in event.message
    return event


def test_empty_message_list(tiny_lm):
    err = error_of(make_client(tiny_lm), Chat("a", ()))
    assert err.code == "invalid_request" and "empty" in err.message


def test_unknown_role(tiny_lm):
    with pytest.raises(InvalidRequest, match="robot"):
        Message("robot", "hi")
    err = error_of(make_client(tiny_lm), Chat("a", ({"role": "robot", "content": "hi"},)))
    assert "robot" in err.message


def test_non_text_content(tiny_lm):
    import base64
    import io

    from PIL import Image

    client = make_client(tiny_lm)
    remote = [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "https://x/x.png"}}]
    assert "web addresses are not fetched" in error_of(client, Chat("a", ({"role": "user", "content": remote},))).message
    buf = io.BytesIO()
    Image.new("RGB", (8, 8)).save(buf, "PNG")
    url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    image = [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": url}}]
    assert "cannot see images" in error_of(client, Chat("b", ({"role": "user", "content": image},))).message
    audio = [{"type": "input_audio", "input_audio": {}}]
    assert "input_audio" in error_of(client, Chat("c", ({"role": "user", "content": audio},))).message
    assert parse_messages([{"role": "user", "content": [{"type": "text", "text": "ok"}]}])[0].content == "ok"


def test_message_longer_than_context(tiny_lm):
    client = make_client(tiny_lm)
    err = error_of(client, Chat("a", (Message("user", "word " * 3000),)))
    assert err.code == "context_length_exceeded" and "2048" in err.message
    assert isinstance(client.run(Chat("b", (Message("user", "still works"),), SamplingParams(max_tokens=2)))[-1], Done)


def test_reply_is_cut_at_the_context_window(tiny_lm):
    client = make_client(tiny_lm)
    n = len(tiny_lm.template.prompt_ids([Message("user", "word " * 670)]))
    assert 2048 - 100 < n < 2048
    done = chat(client, "a", [Message("user", "word " * 670)], max_tokens=100)
    assert done.stats.finish_reason == "window" and done.stats.generated_tokens == 2048 - n


def test_stop_before_generate(tiny_lm):
    err = error_of(make_client(tiny_lm), Stop("nothing-running"))
    assert err.code == "unknown_request"


def test_two_generates_at_once_on_one_session(tiny_lm):
    client = make_client(tiny_lm)
    client.run(CreateSession("c", "s", "Be brief."))
    client.run(AppendInput("a", "s", (Message("user", "Hello"),)))
    client.submit(Generate("g1", "s", SamplingParams(max_tokens=5)))
    second = error_of(client, Generate("g2", "s"))
    assert "busy" in second.message
    first = list(client.stream(None, "g1"))[-1]
    assert isinstance(first, Done) and first.stats.generated_tokens == 5


def test_unknown_session(tiny_lm):
    client = make_client(tiny_lm)
    for cmd in (AppendInput("a", "nope", (Message("user", "x"),)), Generate("b", "nope"), EndSession("c", "nope")):
        assert error_of(client, cmd).code == "unknown_session"


def test_session_used_after_end(tiny_lm):
    client = make_client(tiny_lm)
    client.run(CreateSession("c", "s"))
    assert isinstance(client.run(EndSession("e", "s"))[-1], Done)
    assert error_of(client, Generate("g", "s")).code == "unknown_session"


def test_all_slots_pinned_is_a_retryable_busy(tiny_lm):
    client = make_client(tiny_lm, num_slots=1)
    client.run(CreateSession("c", "s"))
    err = error_of(client, Chat("a", (Message("user", "hi"),)))
    assert err.code == "busy" and err.retryable


def test_bad_sampling_params_are_refused():
    for bad in (dict(max_tokens=-1), dict(temperature=9), dict(top_p=0), dict(repetition_penalty=5), dict(stop=("",))):
        with pytest.raises(InvalidRequest):
            SamplingParams(**bad)
