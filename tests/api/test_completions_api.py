"""/v1/completions over the tiny model (a raw prompt: no chat template), in process and through
OpenAI's own client on a real socket; the `model` field on both completion routes; bad input
answered with a 400 that names the field."""

from __future__ import annotations

import json

import pytest
from api_helpers import MODEL, run, served, sse_data, user

PROMPT = "Once upon a time, in a land of rivers and hills, there lived a baker who "


def test_a_completion_continues_the_prompt_and_the_next_one_reuses_its_kv() -> None:
    async def main() -> None:
        async with served() as s:
            r = await s.client.post("/v1/completions", json={"model": MODEL, "prompt": PROMPT * 2, "max_tokens": 6,
                                                             "temperature": 0})
            assert r.status_code == 200, r.text
            body = r.json()
            assert body["object"] == "text_completion" and body["id"].startswith("cmpl-") and body["model"] == MODEL
            choice = body["choices"][0]
            assert choice["index"] == 0 and choice["finish_reason"] in ("stop", "length") and choice["logprobs"] is None
            first = body["usage"]
            assert 0 < first["completion_tokens"] <= 6 and first["prompt_tokens_details"]["cached_tokens"] == 0
            assert first["total_tokens"] == first["prompt_tokens"] + first["completion_tokens"]
            longer = PROMPT * 2 + choice["text"] + " and so"
            second = (await s.client.post("/v1/completions", json={"prompt": [longer], "max_tokens": 4,
                                                                   "temperature": 0})).json()
            cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
            assert first["prompt_tokens"] <= cached < second["usage"]["prompt_tokens"], second["usage"]
            assert s.gateway.stats().origins == {"api": 2}
    run(main())


def test_the_prompt_is_not_wrapped_in_the_chat_template() -> None:
    async def main() -> None:
        async with served() as s:
            text = "Hello there"
            raw = (await s.client.post("/v1/completions", json={"prompt": text, "max_tokens": 1})).json()
            chat = (await s.client.post("/v1/chat/completions", json={"messages": [user(text)], "max_tokens": 1})).json()
            assert raw["usage"]["prompt_tokens"] < chat["usage"]["prompt_tokens"]
    run(main())


def test_max_tokens_defaults_to_openais_16() -> None:
    async def main() -> None:
        async with served() as s:
            body = (await s.client.post("/v1/completions", json={"prompt": PROMPT, "temperature": 0})).json()
            assert body["usage"]["completion_tokens"] <= 16
    run(main())


def test_streaming_sends_text_chunks_a_finish_usage_and_done() -> None:
    async def main() -> None:
        async with served() as s:
            req = {"prompt": PROMPT, "max_tokens": 6, "stream": True, "temperature": 0,
                   "stream_options": {"include_usage": True}}
            r = await s.client.post("/v1/completions", json=req)
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
            data = sse_data(r.text)
            assert data[-1] == "[DONE]"
            chunks = [json.loads(d) for d in data[:-1]]
            assert all(c["object"] == "text_completion" and c["id"] == chunks[0]["id"] for c in chunks)
            usage = chunks[-1]
            assert usage["choices"] == [] and usage["usage"]["completion_tokens"] > 0
            finish = chunks[-2]["choices"][0]
            assert finish["finish_reason"] in ("stop", "length") and finish["text"] == ""
            text = "".join(c["choices"][0]["text"] for c in chunks[:-2])
            whole = (await s.client.post("/v1/completions", json={**req, "stream": False})).json()
            assert text == whole["choices"][0]["text"]
    run(main())


@pytest.mark.parametrize("route", ["/v1/completions", "/v1/chat/completions"])
def test_the_model_field(route: str) -> None:
    async def main() -> None:
        async with served() as s:
            body = {"prompt": "Hi"} if route == "/v1/completions" else {"messages": [user("Hi")]}
            listed = (await s.client.get("/v1/models")).json()["data"][0]["id"]
            for name in (listed, listed.upper(), None):
                r = await s.client.post(route, json={**body, "model": name, "max_tokens": 2})
                assert r.status_code == 200, (name, r.text)
            r = await s.client.post(route, json={**body, "model": "gpt-4o", "max_tokens": 2})
            assert r.status_code == 404
            error = r.json()["error"]
            assert error["code"] == "model_not_found" and error["param"] == "model" and MODEL in error["message"]
    run(main())


def test_the_settings_names_of_the_model_are_accepted_too() -> None:
    from desktop.api.model_ids import aliases, answers_to

    names = aliases("/home/me/models/Qwen2.5-7B-Instruct-Q4_K_M.gguf")
    assert answers_to("qwen2.5-7b-instruct-q4_k_m", "Qwen2.5-7B", names)
    assert answers_to("Qwen2.5-7B-Instruct-Q4_K_M.gguf", "Qwen2.5-7B", names)
    assert answers_to("default", "SmolLM2-360M-Instruct", aliases("default"))
    assert answers_to("my-model", "x", aliases("/models/my-model/"))
    assert not answers_to("gpt-4o", "SmolLM2-360M-Instruct", aliases("default"))


@pytest.mark.parametrize(("body", "param"), [
    ({"prompt": ["one", "two"]}, "prompt"),
    ({"prompt": []}, "prompt"),
    ({"prompt": [1, 2, 3]}, "prompt"),
    ({"prompt": ""}, "prompt"),
    ({}, "prompt"),
    ({"prompt": "Hi", "echo": True}, "echo"),
    ({"prompt": "Hi", "n": 2}, "n"),
    ({"prompt": "Hi", "best_of": 3}, "best_of"),
    ({"prompt": "Hi", "logprobs": 2}, "logprobs"),
    ({"prompt": "Hi", "suffix": "end"}, "suffix"),
    ({"prompt": "Hi", "max_tokens": 0}, "max_tokens"),
    ({"prompt": "Hi", "temperature": 9}, "temperature"),
    ({"prompt": "Hi", "top_p": "high"}, "top_p"),
])
def test_bad_input_is_a_400_naming_the_field(body: dict, param: str) -> None:
    async def main() -> None:
        async with served() as s:
            r = await s.client.post("/v1/completions", json=body)
            assert r.status_code == 400, r.text
            error = r.json()["error"]
            assert error["param"] == param and error["type"] == "invalid_request_error", error
            assert param in error["message"] or param == "prompt"
    run(main())


def test_openais_client_completes_and_streams() -> None:
    """The `openai` package itself, against the server on 127.0.0.1."""
    from openai import AsyncOpenAI, NotFoundError

    async def main() -> None:
        async with served(real=True, key="sk-local") as s:
            client = AsyncOpenAI(base_url=s.url + "/v1", api_key="sk-local", max_retries=0)
            done = await client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=5, temperature=0)
            assert done.object == "text_completion" and done.choices[0].text and done.usage.completion_tokens > 0
            parts = [c async for c in await client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=5,
                                                                     temperature=0, stream=True)]
            assert "".join(p.choices[0].text for p in parts if p.choices) == done.choices[0].text
            assert parts[-1].choices[0].finish_reason == done.choices[0].finish_reason
            assert [m.id async for m in client.models.list()] == [MODEL]
            with pytest.raises(NotFoundError) as err:
                await client.completions.create(model="gpt-3.5-turbo-instruct", prompt="Hi", max_tokens=2)
            assert err.value.code == "model_not_found"
            await client.close()
    run(main())
