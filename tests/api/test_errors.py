"""Errors in OpenAI's JSON shape with the right status: 400 for bad requests (body, fields,
images for a text-only model), 401 without the key, 429 with Retry-After when the queue is full,
503 while no model is loaded, 404/405 for unknown routes."""

from __future__ import annotations

import asyncio

import httpx

from api_helpers import run, served, tiny_gateway, user
from desktop.api.app import make_app
from desktop.model.params import SamplingParams

CHAT = "/v1/chat/completions"


def error_of(r: httpx.Response, status: int) -> dict:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"]
    return err


def test_bad_requests_are_400_and_say_what_is_wrong() -> None:
    async def main() -> None:
        async with served() as s:
            cases = [
                ({"messages": "hi"}, "messages"),
                ({"messages": []}, "empty"),
                ({"messages": [{"role": "wizard", "content": "x"}]}, "wizard"),
                ({"messages": [user("x")], "temperature": 9}, "temperature"),
                ({"messages": [user("x")], "top_p": 0}, "top_p"),
                ({"messages": [user("x")], "max_tokens": 0}, "max_tokens"),
                ({"messages": [user("x")], "seed": -1}, "seed"),
                ({"messages": [user("x")], "stop": [""]}, "stop"),
                ({"messages": [user("x")], "n": 2}, "n must be 1"),
                ({"messages": [user("x")], "tools": [{"type": "function"}]}, "tools[0] must be"),
                ({"messages": [{"role": "tool", "content": "x"}]}, "answers no tool call"),
            ]
            for body, words in cases:
                err = error_of(await s.client.post(CHAT, json=body), 400)
                assert words in err["message"], (body, err)
                assert err["type"] == "invalid_request_error"
            err = error_of(await s.client.post(CHAT, content=b"{not json", headers={"content-type": "application/json"}), 400)
            assert err["message"] == ("The request body is not valid JSON (at character 1: "
                                      "Expecting property name enclosed in double quotes).") and err["param"] is None
            assert "must be a JSON object" in error_of(await s.client.post(CHAT, json=[user("x")]), 400)["message"]
            assert "is empty" in error_of(await s.client.post(CHAT, headers={"content-type": "application/json"}), 400)["message"]
            image = {"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                                  {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}
            err = error_of(await s.client.post(CHAT, json={"messages": [image]}), 400)
            assert err["code"] == "image_not_supported" and "text only" in err["message"]
            assert s.gateway.stats().requests.submitted == 0  # nothing bad reached the queue
            assert error_of(await s.client.get("/v1/nothing"), 404)["code"] == "not_found"
            assert error_of(await s.client.get(CHAT), 405)["code"] == "method_not_allowed"
    run(main())


def test_a_body_not_sent_as_json_says_so() -> None:
    """`curl -d '{...}'` sends form-urlencoded: the body is not read as JSON (a web page could
    otherwise post to the local API without the browser asking first); the error says how to send it."""
    async def main() -> None:
        async with served() as s:
            body = b'{"messages": [{"role": "user", "content": "hi"}]}'
            for headers, sent in [({"content-type": "application/x-www-form-urlencoded"}, "sent as application/x-www-form-urlencoded"),
                                  ({}, "had no Content-Type")]:
                err = error_of(await s.client.post(CHAT, content=body, headers=headers), 400)
                assert "must be JSON sent with the header 'Content-Type: application/json'" in err["message"]
                assert sent in err["message"] and err["param"] is None
            assert s.gateway.stats().requests.submitted == 0
    run(main())


def test_out_of_range_parameters_name_their_param_alike() -> None:
    async def main() -> None:
        async with served() as s:
            context = s.gateway.context_length()
            assert context > 0
            for value in (0, 100_000_000):
                err = error_of(await s.client.post(CHAT, json={"messages": [user("x")], "max_tokens": value}), 400)
                assert err["message"] == f"max_tokens must be between 1 and 1000000 (got {value})."
                assert err["param"] == "max_tokens"
            err = error_of(await s.client.post(CHAT, json={"messages": [user("x")], "max_completion_tokens": 0}), 400)
            assert err["param"] == "max_completion_tokens"
            for name, value in [("temperature", 9), ("top_p", 0), ("seed", -1), ("stop", [""])]:
                err = error_of(await s.client.post(CHAT, json={"messages": [user("x")], name: value}), 400)
                assert err["param"] == name and err["message"].startswith(name), err
            # more than the context window: refused as OpenAI does, before it reaches the queue
            err = error_of(await s.client.post(CHAT, json={"messages": [user("x")], "max_tokens": context + 1}), 400)
            assert err["code"] == "context_length_exceeded" and err["param"] == "max_tokens"
            assert f"context window of {context:,} tokens" in err["message"]
            assert s.gateway.stats().requests.submitted == 0
            r = await s.client.post(CHAT, json={"messages": [user("x")], "max_tokens": min(context, 4)})
            assert r.status_code == 200, r.text
    run(main())


def test_a_key_is_required_when_set() -> None:
    async def main() -> None:
        async with served(key="s3cret-key") as s:
            assert (await s.client.get("/v1/models")).status_code == 200
            for headers in ({"Authorization": ""}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret-key"}):
                err = error_of(await s.client.get("/v1/models", headers=headers), 401)
                assert err["code"] == "invalid_api_key"
            err = error_of(await s.client.post(CHAT, json={"messages": [user("x")]}, headers={"Authorization": ""}), 401)
            assert (await s.client.get("/metrics", headers={"Authorization": ""})).status_code == 401
    run(main())


def test_a_full_queue_is_429_with_retry_after() -> None:
    async def main() -> None:
        async with served(queue_max=0, max_running=1) as s:
            hog = s.gateway.chat([user("Go on forever")], SamplingParams(max_tokens=400, ignore_eos=True))
            r = await s.client.post(CHAT, json={"messages": [user("Me too")], "max_tokens": 2})
            err = error_of(r, 429)
            assert err["code"] == "queue_full" and err["type"] == "rate_limit_error"
            assert int(r.headers["retry-after"]) >= 1
            await hog.aclose()
            async for _ in hog:
                pass
    run(main())


def test_no_model_is_503() -> None:
    async def main() -> None:
        loading = [True]
        app = make_app(lambda: None, loading=lambda: loading[0])
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as client:
            r = await client.post(CHAT, json={"messages": [user("anyone?")]})
            err = error_of(r, 503)
            assert err["code"] == "model_not_loaded" and "loading" in err["message"] and r.headers["retry-after"]
            loading[0] = False
            err = error_of(await client.post(CHAT, json={"messages": [user("anyone?")]}), 503)
            assert "No model is loaded" in err["message"]
            assert (await client.get("/v1/models")).json()["data"] == []
            assert (await client.get("/health")).json()["status"] == "no_model"
    run(main())


def test_a_client_that_hangs_up_cancels_its_request_and_a_closed_gateway_is_503() -> None:
    async def main() -> None:
        async with served(real=True, max_running=1) as s:
            hog = s.gateway.chat([user("Go on forever")], SamplingParams(max_tokens=2000, ignore_eos=True))
            body = {"messages": [user("A long one")], "max_tokens": 400, "stream": True}
            async with s.client.stream("POST", CHAT, json=body) as r:
                async for line in r.aiter_lines():
                    if line.startswith(": queued"):
                        break  # hang up while it waits
            for _ in range(100):
                if s.gateway.stats().requests.cancelled == 1:
                    break
                await asyncio.sleep(0.05)
            assert s.gateway.stats().requests.cancelled == 1, s.gateway.stats().requests
            assert s.gateway.stats().queue.length == 0
            await hog.aclose()
            await s.gateway.close()
            err = error_of(await s.client.post(CHAT, json={"messages": [user("x")]}), 503)
            assert err["code"] == "shutdown"
    run(main())
