"""OpenAI's tool and format contract for one request: `tools`, `tool_choice`,
`parallel_tool_calls` and `response_format` checked (a 400 naming the field), the grammar the
reply must follow (a required or named call, a JSON object or schema), and the conversation's tool
rounds turned into the gateway's message dicts.

An agent sends back the assistant messages that carried our tool calls with each tool result.
`CallMemory` keeps the text the model generated for the calls this API returned, so such a
message is rendered from that very text: the slot's KV still holds it, and the next round
prefills only the tool result."""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from desktop.api.errors import ApiError
from desktop.bounded import BoundedDict
from desktop.errors import InvalidRequest
from desktop.model import grammar
from desktop.model.tool_calls import ParsedReply, parse
from desktop.model.tool_render import tools_json

NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
CHOICES = ("none", "auto", "required")


class CallMemory:
    """The generated text of the last `size` replies returned as tool calls, by their calls
    (id, name, arguments). Thread-safe: requests finish on the event loop and in tests' threads."""

    def __init__(self, size: int = 1024) -> None:
        self._texts: BoundedDict[tuple, str] = BoundedDict(size)
        self._lock = threading.Lock()

    def put(self, calls: Sequence[tuple[str, str, str]], text: str) -> None:
        with self._lock:
            self._texts[tuple(calls)] = text

    def get(self, calls: Sequence[tuple[str, str, str]]) -> str | None:
        with self._lock:
            return self._texts.get(tuple(calls))


@dataclass(frozen=True)
class ToolPlan:
    """What one request asks of tools and formats."""

    tools: list[dict[str, Any]] = field(default_factory=list)  # as sent: {"type": "function", "function": …}
    choice: str = "auto"  # none | auto | required | a function's name
    parallel: bool = True
    grammar: str = ""

    @property
    def names(self) -> list[str]:
        return [t["function"]["name"] for t in self.tools]

    @property
    def parses(self) -> bool:
        """Whether the reply is read for tool calls."""
        return bool(self.tools) and self.choice != "none"

    def read(self, text: str) -> ParsedReply | None:
        """The reply's tool calls (None: text); without parallel calls only the first is kept."""
        reply = parse(text, self.names) if self.parses else None
        if reply is not None and not self.parallel and len(reply.calls) > 1:
            return ParsedReply(reply.content, reply.calls[:1])
        return reply


def plan_of(body: Any) -> ToolPlan:
    """The request's ToolPlan; ApiError (400, naming the field) for anything malformed."""
    tools = _tools(body.tools)
    choice = _choice(getattr(body, "tool_choice", None), tools)
    parallel = getattr(body, "parallel_tool_calls", None)
    if parallel is not None and not isinstance(parallel, bool):
        raise ApiError(400, "parallel_tool_calls must be true or false.", param="parallel_tool_calls")
    text = ""
    if tools and choice not in ("none", "auto"):
        chosen = [t["function"] for t in tools if choice == "required" or t["function"]["name"] == choice]
        text = _checked(lambda: grammar.tool_call_grammar(chosen), "tool_choice" if choice != "required" else "tools")
    elif body.response_format:
        text = _format_grammar(body.response_format)
    return ToolPlan(tools, choice, parallel is not False, text)


def tool_messages(messages: list[dict[str, Any]], plan: ToolPlan, memory: CallMemory) -> list[dict[str, Any]]:
    """The gateway's message dicts: the tools on the first message, OpenAI's tool_calls as
    (id, name, arguments) triples (or, for calls this API returned, the text the model generated),
    each tool message's call id checked against the calls made before it."""
    out: list[dict[str, Any]] = []
    made: set[str] = set()
    for i, m in enumerate(messages):
        m = dict(m)
        calls = m.pop("tool_calls", None)
        if calls:
            if m.get("role") != "assistant":
                raise ApiError(400, f"Message {i + 1}: only assistant messages carry tool_calls.",
                               param=f"messages[{i}].tool_calls")
            triples = _calls(calls, i)
            made.update(c[0] for c in triples)
            text = memory.get(triples)
            if text is not None:
                m["content"] = text
            else:
                m["tool_calls"] = triples
        if m.get("role") == "tool":
            cid = m.get("tool_call_id")
            if not isinstance(cid, str) or cid not in made:
                raise ApiError(400, f"Message {i + 1}: tool_call_id {cid!r} answers no tool call made by an earlier "
                               "assistant message.", param=f"messages[{i}].tool_call_id")
            if m.get("content") is None:
                m["content"] = ""
        else:
            m.pop("tool_call_id", None)
        out.append(m)
    if out and plan.tools:
        out[0]["tools"] = tools_json(plan.tools)
    return out


def message_of(reply: ParsedReply, ids: Sequence[str]) -> dict[str, Any]:
    """The assistant message of a reply read as tool calls (content null when it wrote none)."""
    return {"role": "assistant", "content": reply.content or None,
            "tool_calls": [{"id": cid, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                           for cid, c in zip(ids, reply.calls)]}


def triples(reply: ParsedReply, ids: Sequence[str]) -> list[tuple[str, str, str]]:
    return [(cid, c.name, c.arguments) for cid, c in zip(ids, reply.calls)]


def _tools(raw: Any) -> list[dict[str, Any]]:
    if not raw:
        return []
    if not isinstance(raw, list):
        raise ApiError(400, "tools must be a list of {type: \"function\", function: {…}} objects.", param="tools")
    out, seen = [], set()
    for i, t in enumerate(raw):
        where = f"tools[{i}]"
        if not isinstance(t, dict) or t.get("type") != "function" or not isinstance(t.get("function"), dict):
            raise ApiError(400, f"{where} must be {{\"type\": \"function\", \"function\": {{name, parameters}}}}.",
                           param=where)
        fn = t["function"]
        name = fn.get("name")
        if not isinstance(name, str) or not NAME.match(name):
            raise ApiError(400, f"{where}.function.name must be 1 to 64 letters, digits, _ . or - (got {name!r}).",
                           param=f"{where}.function.name")
        if name in seen:
            raise ApiError(400, f"{where}.function.name {name!r} is offered twice.", param=f"{where}.function.name")
        seen.add(name)
        params = fn.get("parameters")
        if params is not None:
            if not isinstance(params, dict):
                raise ApiError(400, f"{where}.function.parameters must be a JSON Schema object.",
                               param=f"{where}.function.parameters")
            _checked(lambda: grammar.json_grammar(params), f"{where}.function.parameters")
        if "description" in fn and not isinstance(fn["description"], str):
            raise ApiError(400, f"{where}.function.description must be text.", param=f"{where}.function.description")
        out.append({"type": "function", "function": fn})
    return out


def _choice(raw: Any, tools: list[dict[str, Any]]) -> str:
    if raw is None:
        return "auto" if tools else "none"
    if isinstance(raw, str) and raw in CHOICES:
        if raw != "none" and not tools:
            raise ApiError(400, f"tool_choice is {raw!r} but no tools are given.", param="tool_choice")
        return raw
    if isinstance(raw, dict) and raw.get("type") == "function" and isinstance(raw.get("function"), dict):
        name = raw["function"].get("name")
        if name not in [t["function"]["name"] for t in tools]:
            raise ApiError(400, f"tool_choice names {name!r}, which is not among the tools.", param="tool_choice")
        return name
    raise ApiError(400, "tool_choice must be \"none\", \"auto\", \"required\" or "
                   "{\"type\": \"function\", \"function\": {\"name\": …}}.", param="tool_choice")


def _calls(raw: Any, i: int) -> list[tuple[str, str, str]]:
    where = f"messages[{i}].tool_calls"
    if not isinstance(raw, list):
        raise ApiError(400, f"{where} must be a list.", param=where)
    out = []
    for j, c in enumerate(raw):
        fn = c.get("function") if isinstance(c, dict) else None
        if not isinstance(fn, dict) or not isinstance(c.get("id"), str) or not isinstance(fn.get("name"), str):
            raise ApiError(400, f"{where}[{j}] must have an id and a function with a name and arguments.",
                           param=f"{where}[{j}]")
        args = fn.get("arguments", "{}")
        try:
            if not isinstance(args, str) or not isinstance(json.loads(args), dict):
                raise ValueError
        except ValueError:
            raise ApiError(400, f"{where}[{j}].function.arguments must be a JSON object as text.",
                           param=f"{where}[{j}].function.arguments") from None
        out.append((c["id"], fn["name"], args))
    return out


def _format_grammar(fmt: Any) -> str:
    kind = fmt.get("type", "text") if isinstance(fmt, dict) else None
    if kind == "text":
        return ""
    if kind == "json_object":
        return _checked(lambda: grammar.json_grammar(True), "response_format")
    if kind == "json_schema":
        spec = fmt.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        if not isinstance(schema, dict):
            raise ApiError(400, "response_format.json_schema.schema must be a JSON Schema object.",
                           param="response_format.json_schema.schema")
        return _checked(lambda: grammar.json_grammar(schema), "response_format.json_schema.schema")
    raise ApiError(400, "response_format.type must be \"text\", \"json_object\" or \"json_schema\".",
                   param="response_format.type")


def _checked(make: Callable[[], str], param: str) -> str:
    """The grammar `make` builds, checked by the grammar library (400 naming `param` if refused)."""
    try:
        text = make()
        grammar.check(text)
    except InvalidRequest as err:
        raise ApiError(400, f"{param}: {err.message}", param=param) from None
    except (ValueError, TypeError) as err:  # a schema that is not JSON-able or not an object
        raise ApiError(400, f"{param}: the schema cannot be used ({err}).", param=param) from None
    return text
