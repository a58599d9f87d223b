"""Replies read as tool calls, one test per format, and what is not a call stays text."""

import json

import pytest

from desktop.model.tool_calls import marker_at, may_start_call, parse

NAMES = ("get_weather", "search")


def args(call):
    return json.loads(call.arguments)


def test_hermes_qwen_calls_with_text_before():
    text = ('Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
            '<tool_call>\n{"name": "search", "arguments": {"q": "rain"}}\n</tool_call>')
    reply = parse(text, NAMES)
    assert reply.content == "Let me check."
    assert [c.name for c in reply.calls] == ["get_weather", "search"]
    assert args(reply.calls[0]) == {"city": "Paris"} and args(reply.calls[1]) == {"q": "rain"}


def test_hermes_call_cut_short_before_its_close_still_reads():
    reply = parse('<tool_call>{"name": "search", "arguments": {"q": "x"}}', NAMES)
    assert reply.calls[0].name == "search"


def test_llama3_json_with_parameters_and_python_tag():
    reply = parse('<|python_tag|>{"name": "get_weather", "parameters": {"city": "Oslo"}}', NAMES)
    assert reply.content == "" and args(reply.calls[0]) == {"city": "Oslo"}
    two = parse('{"name": "search", "parameters": {"q": "a"}}; {"name": "search", "parameters": {"q": "b"}}', NAMES)
    assert [args(c)["q"] for c in two.calls] == ["a", "b"]


def test_mistral_list_and_args_forms():
    reply = parse('[TOOL_CALLS][{"name": "search", "arguments": {"q": "x"}}, {"name": "get_weather", "arguments": {}}]', NAMES)
    assert [c.name for c in reply.calls] == ["search", "get_weather"]
    newer = parse('[TOOL_CALLS]get_weather[ARGS]{"city": "Rome"}', NAMES)
    assert args(newer.calls[0]) == {"city": "Rome"}


def test_arguments_given_as_json_text_are_read():
    reply = parse('<tool_call>{"name": "search", "arguments": "{\\"q\\": \\"y\\"}"}</tool_call>', NAMES)
    assert args(reply.calls[0]) == {"q": "y"}


@pytest.mark.parametrize("text", [
    "Just an answer.",
    '<tool_call>{"name": "search", "arguments": {"q": </tool_call>',   # broken JSON
    '<tool_call>{"name": "delete_all", "arguments": {}}</tool_call>',  # a function not offered
    '{"answer": 42}',                                                   # JSON, not a call
    '[TOOL_CALLS]not json',
])
def test_what_is_not_a_valid_call_is_text(text):
    assert parse(text, NAMES) is None


def test_stream_prefix_checks():
    assert may_start_call("") and may_start_call("  <tool") and may_start_call('{"na')
    assert not may_start_call("Hello")
    assert marker_at("Sure <tool_c") == 5 and marker_at("Sure <tool_call>{") == 5 and marker_at("Sure.") == -1
