"""/v1/chat/completions and /v1/models over the tiny model, in process (httpx ASGI transport):
JSON and streamed replies, sampling fields, usage with cached tokens on a conversation's second
turn, and requests recorded as coming from the API."""

from __future__ import annotations

import json

from api_helpers import MODEL, run, served, sse_data, user


def test_models_lists_the_loaded_model() -> None:
    async def main() -> None:
        async with served() as s:
            r = await s.client.get("/v1/models")
            assert r.status_code == 200
            assert [m["id"] for m in r.json()["data"]] == [MODEL] and r.json()["object"] == "list"
            assert (await s.client.get(f"/v1/models/{MODEL}")).json()["id"] == MODEL
            missing = await s.client.get("/v1/models/gpt-9")
            assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"
    run(main())


def test_a_completion_and_its_usage_then_the_second_turn_hits_the_cache() -> None:
    async def main() -> None:
        async with served() as s:
            msgs = [{"role": "system", "content": "You are terse."}, user("Hello there, how are you today?")]
            r = await s.client.post("/v1/chat/completions", json={"model": MODEL, "messages": msgs,
                                                                  "max_tokens": 5, "temperature": 0, "seed": 1})
            assert r.status_code == 200, r.text
            body = r.json()
            assert body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-")
            choice = body["choices"][0]
            assert choice["message"]["role"] == "assistant" and choice["finish_reason"] in ("stop", "length")
            usage = body["usage"]
            assert 0 < usage["completion_tokens"] <= 5
            assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
            assert usage["prompt_tokens_details"]["cached_tokens"] < usage["prompt_tokens"]  # the system prompt at most
            msgs += [{"role": "assistant", "content": choice["message"]["content"]}, user("And then?")]
            second = (await s.client.post("/v1/chat/completions", json={"messages": msgs, "max_tokens": 3})).json()
            cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
            assert usage["prompt_tokens"] <= cached < second["usage"]["prompt_tokens"]  # the whole first turn
            assert s.gateway.stats().origins == {"api": 2}
    run(main())


def test_greedy_with_a_seed_repeats_and_max_tokens_bounds_the_reply() -> None:
    async def main() -> None:
        async with served() as s:
            req = {"messages": [user("Count with me")], "max_tokens": 4, "temperature": 0.9, "top_p": 0.8, "seed": 7}
            a, b = [(await s.client.post("/v1/chat/completions", json=req)).json() for _ in range(2)]
            assert a["choices"][0]["message"] == b["choices"][0]["message"]
            assert a["usage"]["completion_tokens"] <= 4
    run(main())


def test_streaming_sends_role_content_finish_usage_and_done() -> None:
    async def main() -> None:
        async with served() as s:
            req = {"messages": [user("Tell me a story")], "max_tokens": 6, "stream": True, "seed": 3,
                   "stream_options": {"include_usage": True}}
            async with s.client.stream("POST", "/v1/chat/completions", json=req) as r:
                assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
                body = (await r.aread()).decode()
            data = sse_data(body)
            assert data[-1] == "[DONE]"
            chunks = [json.loads(d) for d in data[:-1]]
            assert all(c["object"] == "chat.completion.chunk" and c["id"] == chunks[0]["id"] for c in chunks)
            assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
            finish = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
            assert len(finish) == 1 and finish[0]["choices"][0]["finish_reason"] in ("stop", "length")
            assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0
            text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
            plain = await s.client.post("/v1/chat/completions", json={**req, "stream": False})
            assert text == plain.json()["choices"][0]["message"]["content"]  # same seed, same reply
    run(main())


def test_a_stop_string_ends_the_reply_before_it() -> None:
    async def main() -> None:
        async with served() as s:
            req = {"messages": [user("Say something")], "max_tokens": 12, "temperature": 0}
            full = (await s.client.post("/v1/chat/completions", json=req)).json()["choices"][0]["message"]["content"]
            assert len(full) > 2, full
            stop = full[len(full) // 2:len(full) // 2 + 2]
            cut = (await s.client.post("/v1/chat/completions", json={**req, "stop": [stop]})).json()
            assert stop not in cut["choices"][0]["message"]["content"]
            assert full.startswith(cut["choices"][0]["message"]["content"])
    run(main())


def test_developer_messages_and_max_completion_tokens_are_understood() -> None:
    async def main() -> None:
        async with served() as s:
            r = await s.client.post("/v1/chat/completions", json={
                "messages": [{"role": "developer", "content": "Be brief."}, user("Hi"),
                             {"role": "assistant", "content": None}, user("Again")],
                "max_completion_tokens": 2, "presence_penalty": 0, "user": "someone", "n": 1})
            assert r.status_code == 200, r.text
            assert 0 < r.json()["usage"]["completion_tokens"] <= 2
    run(main())
