"""A model's reply read as tool calls, in the common formats:

- Hermes / Qwen: text, then one or more `<tool_call>{"name": …, "arguments": {…}}</tool_call>`;
- Llama 3.x: the reply is JSON `{"name": …, "parameters": {…}}` (optionally after
  `<|python_tag|>`, several separated by `;`);
- Mistral: `[TOOL_CALLS][{"name": …, "arguments": {…}}, …]` (or `[TOOL_CALLS]name[ARGS]{…}`).

A reply that is none of these, names a function that was not offered, or holds broken JSON is
not a tool call: `parse` returns None and the caller sends it as text (never an error)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Iterable

HERMES = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)
MARKERS = ("<tool_call>", "[TOOL_CALLS]", "<|python_tag|>")


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call: the function's name and its arguments as a JSON object's text."""

    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class ParsedReply:
    """Text the model wrote before its calls ("" for none), and the calls in order."""

    content: str
    calls: tuple[ToolCall, ...]


def parse(text: str, names: Iterable[str]) -> ParsedReply | None:
    """The tool calls in `text` to functions among `names`; None when it holds none (or any call
    is malformed or to a function not offered: the whole reply is then text)."""
    names = set(names)
    stripped = text.strip()
    if "<tool_call>" in text:
        head, _, rest = text.partition("<tool_call>")
        found = [_call(_json(m), names) for m in HERMES.findall("<tool_call>" + rest)]
        return _reply(head, found)
    if stripped.startswith("[TOOL_CALLS]"):
        return _reply("", _mistral(stripped[len("[TOOL_CALLS]"):].strip(), names))
    if stripped.startswith("<|python_tag|>"):
        stripped = stripped[len("<|python_tag|>"):].strip()
    if stripped.startswith("{") or stripped.startswith("["):
        return _reply("", _llama(stripped, names))
    return None


def may_start_call(text: str) -> bool:
    """Whether a reply that begins with `text` may still turn out to be a tool call (streaming
    holds such text back): it starts with a marker or JSON, or is a prefix of a marker."""
    s = text.lstrip()
    if not s:
        return True
    return s[0] in "{[" or any(s.startswith(m) or m.startswith(s) for m in MARKERS)


def prose_so_far(text: str) -> str:
    """The part of a streaming reply that is surely prose, not a tool call being written: nothing
    while the reply may still be a call as a whole, else the text before a `<tool_call>` (or a
    partial one at its end)."""
    if may_start_call(text):
        return ""
    cut = marker_at(text)
    return text[:cut] if cut >= 0 else text


def marker_at(text: str) -> int:
    """Where a Hermes `<tool_call>` opens in text that has prose before it (-1: none). A partial
    marker at the end counts, so a stream holds it back until it is known."""
    i = text.find("<tool_call>")
    if i >= 0:
        return i
    for k in range(min(len("<tool_call>") - 1, len(text)), 0, -1):
        if "<tool_call>".startswith(text[-k:]):
            return len(text) - k
    return -1


def _reply(content: str, calls: list[ToolCall | None] | None) -> ParsedReply | None:
    if not calls or any(c is None for c in calls):
        return None
    return ParsedReply(content.strip(), tuple(c for c in calls if c is not None))


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _call(obj: Any, names: set[str]) -> ToolCall | None:
    """A ToolCall from {"name", "arguments" | "parameters"} (arguments an object or its JSON text)."""
    if not isinstance(obj, dict) or obj.get("name") not in names:
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        args = _json(args)
    if not isinstance(args, dict):
        return None
    return ToolCall(obj["name"], json.dumps(args, ensure_ascii=False))


def _llama(text: str, names: set[str]) -> list[ToolCall | None] | None:
    obj = _json(text)
    if obj is None and ";" in text:
        parts = [_json(p) for p in text.split(";")]
        return [_call(p, names) for p in parts] if all(p is not None for p in parts) else None
    if isinstance(obj, list):
        return [_call(o, names) for o in obj]
    return [_call(obj, names)] if obj is not None else None


def _mistral(text: str, names: set[str]) -> list[ToolCall | None] | None:
    if "[ARGS]" in text:  # [TOOL_CALLS]name[ARGS]{…} (newer tokenizers), possibly repeated
        calls: list[ToolCall | None] = []
        for piece in text.split("[TOOL_CALLS]"):
            name, _, args = piece.partition("[ARGS]")
            calls.append(_call({"name": name.strip(), "arguments": _json(args.strip())}, names))
        return calls
    obj = _json(text)
    if isinstance(obj, dict):
        obj = [obj]
    return [_call(o, names) for o in obj] if isinstance(obj, list) else None
