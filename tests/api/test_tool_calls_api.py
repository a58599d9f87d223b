"""Tools and response_format through the API over the tiny model: constrained calls (required,
named) valid against the function's schema whatever the model, the stream's tool_calls deltas read
by the official openai client, JSON by schema, each bad input a 400 naming its field, a reply that
is no call returned as text, and the next tool round hitting the KV of the call it answers."""

from __future__ import annotations

import json

import pytest
from openai import AsyncOpenAI

from api_helpers import MODEL, run, served, user

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                                    "days": {"type": "integer", "minimum": 1, "maximum": 7}},
                   "required": ["city", "days"], "additionalProperties": False}}}
SEARCH = {"type": "function", "function": {"name": "search", "parameters": {
    "type": "object", "properties": {"q": {"type": "string", "maxLength": 10}}, "required": ["q"]}}}


def check_weather(args: dict) -> None:
    assert set(args) == {"city", "days"} and isinstance(args["city"], str) and len(args["city"]) <= 12
    assert isinstance(args["days"], int) and 1 <= args["days"] <= 7


def post(s, **req):
    return s.client.post("/v1/chat/completions", json={"max_tokens": 150, "temperature": 0, **req})


def test_a_required_call_is_valid_against_its_schema_and_ends_with_tool_calls() -> None:
    async def main() -> None:
        async with served() as s:
            r = await post(s, messages=[user("Weather in Paris?")], tools=[WEATHER, SEARCH], tool_choice={
                "type": "function", "function": {"name": "get_weather"}})
            assert r.status_code == 200, r.text
            choice = r.json()["choices"][0]
            assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
            [call] = choice["message"]["tool_calls"]
            assert call["type"] == "function" and call["id"].startswith("call_")
            assert call["function"]["name"] == "get_weather"
            check_weather(json.loads(call["function"]["arguments"]))
    run(main())


def test_the_next_round_prefills_only_the_tool_result() -> None:
    async def main() -> None:
        async with served() as s:
            msgs = [{"role": "system", "content": "You call tools."}, user("Weather in Paris for 3 days?")]
            first = (await post(s, messages=msgs, tools=[WEATHER], tool_choice="required")).json()
            message = first["choices"][0]["message"]
            call = message["tool_calls"][0]
            msgs += [message, {"role": "tool", "tool_call_id": call["id"], "content": "Sunny, 21 C, light wind."}]
            second = (await post(s, messages=msgs, tools=[WEATHER], max_tokens=4)).json()
            cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
            before = first["usage"]["prompt_tokens"] + first["usage"]["completion_tokens"]
            assert cached >= before - 1, (cached, before, second["usage"])  # the call's own ids stay in the KV
    run(main())


def test_the_openai_client_streams_tool_call_deltas() -> None:
    async def main() -> None:
        async with served(real=True) as s:
            client = AsyncOpenAI(base_url=f"{s.url}/v1", api_key="x", max_retries=0)
            stream = await client.chat.completions.create(
                model=MODEL, messages=[user("Weather?")], tools=[WEATHER], tool_choice="required", max_tokens=150,
                temperature=0, stream=True)
            calls: dict[int, dict] = {}
            finish = None
            async for chunk in stream:
                delta = chunk.choices[0].delta
                for tc in delta.tool_calls or []:
                    entry = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
                    entry["id"] = tc.id or entry["id"]
                    if tc.function:
                        entry["name"] += tc.function.name or ""
                        entry["arguments"] += tc.function.arguments or ""
                finish = chunk.choices[0].finish_reason or finish
            assert finish == "tool_calls" and list(calls) == [0]
            assert calls[0]["id"].startswith("call_") and calls[0]["name"] == "get_weather"
            check_weather(json.loads(calls[0]["arguments"]))
            await client.close()
    run(main())


def test_response_format_json_schema_and_json_object() -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 8},
                                               "sure": {"type": "boolean"}}, "required": ["answer", "sure"],
              "additionalProperties": False}
    async def main() -> None:
        async with served() as s:
            r = await post(s, messages=[user("Answer in JSON")], response_format={
                "type": "json_schema", "json_schema": {"name": "a", "schema": schema, "strict": True}})
            body = json.loads(r.json()["choices"][0]["message"]["content"])
            assert set(body) == {"answer", "sure"} and isinstance(body["sure"], bool)
            r = await post(s, messages=[user("JSON please")], response_format={"type": "json_object"}, max_tokens=200)
            if r.json()["choices"][0]["finish_reason"] == "stop":
                assert isinstance(json.loads(r.json()["choices"][0]["message"]["content"]), dict)
    run(main())


def test_a_reply_that_is_no_call_is_text_with_finish_stop_or_length() -> None:
    async def main() -> None:
        async with served() as s:
            for stream in (False, True):
                r = await post(s, messages=[user("Hello")], tools=[WEATHER], max_tokens=6, stream=stream)
                assert r.status_code == 200
                if not stream:
                    choice = r.json()["choices"][0]
                    assert choice["finish_reason"] in ("stop", "length") and "tool_calls" not in choice["message"]
                else:
                    assert '"finish_reason":"tool_calls"' not in r.text and "[DONE]" in r.text
    run(main())


@pytest.mark.parametrize("req, param", [
    ({"tools": [{"type": "function", "function": {"name": "bad name!"}}]}, "tools[0].function.name"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": "x"}}]}, "tools[0].function.parameters"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
        "a": {"type": "string", "pattern": "(unclosed"}}}}}]}, "tools[0].function.parameters"),
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}, "response_format.json_schema.schema"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {
        "type": "string", "pattern": "[unclosed"}}}}, "response_format.json_schema.schema"),
    ({"response_format": {"type": "yaml"}}, "response_format.type"),
    ({"messages": [user("hi"), {"role": "tool", "tool_call_id": "call_x", "content": "r"}]}, "messages[1].tool_call_id"),
    ({"messages": [user("hi"), {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "not json"}}]}]},
     "messages[1].tool_calls[0].function.arguments"),
])
def test_bad_input_is_a_400_naming_the_field(req, param) -> None:
    async def main() -> None:
        async with served() as s:
            r = await post(s, **{"messages": [user("hi")], **req})
            assert r.status_code == 400, r.text
            assert r.json()["error"]["param"] == param, r.json()
    run(main())


def test_a_returned_call_comes_back_as_the_text_the_model_generated() -> None:
    from desktop.api.tooling import CallMemory, ToolPlan, tool_messages

    memory, generated = CallMemory(), '<tool_call>\n{"name":"search",  "arguments":{"q":"x"}}\n</tool_call>'
    memory.put([("call_1", "search", '{"q": "x"}')], generated)
    sent = [user("find x"), {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": '{"q": "x"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "found"}]
    out = tool_messages(sent, ToolPlan([SEARCH]), memory)
    assert out[1] == {"role": "assistant", "content": generated}  # the slot's own text: its KV matches
    assert json.loads(out[0]["tools"])[0]["function"]["name"] == "search"
    unknown = tool_messages(sent, ToolPlan([SEARCH]), CallMemory())  # not ours: rendered by the template
    assert unknown[1]["tool_calls"] == [("call_1", "search", '{"q": "x"}')]


def test_other_tools_do_not_reuse_a_slot_rendered_with_different_ones() -> None:
    async def main() -> None:
        async with served() as s:
            msgs = [{"role": "system", "content": "You call tools."}, user("Weather in Paris?")]
            first = (await post(s, messages=msgs, tools=[WEATHER], max_tokens=3)).json()
            again = (await post(s, messages=msgs, tools=[WEATHER], max_tokens=3)).json()
            other = (await post(s, messages=msgs, tools=[SEARCH], max_tokens=3)).json()
            prompt = first["usage"]["prompt_tokens"]
            assert again["usage"]["prompt_tokens_details"]["cached_tokens"] >= prompt - 1
            assert other["usage"]["prompt_tokens_details"]["cached_tokens"] < prompt // 2
    run(main())
