"""Tools and tool rounds in the template's input. A template that renders tools itself (Qwen 2.5,
Llama 3.1, Mistral …) gets them as `apply_chat_template(tools=…)` and the calls and results as
OpenAI-style dicts; one that ignores tools (ChatML, the embedded SmolLM2's) gets a Hermes-style
tools block in its system prompt, calls written as `<tool_call>{json}</tool_call>` in the
assistant's text and results wrapped in `<tool_response>` (the form tool_calls.parse reads)."""

from __future__ import annotations

import json
from typing import Any, Sequence

from desktop.model.messages import Message

PROBE = [{"type": "function", "function": {"name": "omnidesk_probe_fn", "description": "probe",
                                           "parameters": {"type": "object", "properties": {}}}}]
HERMES_TOOLS = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{tools}\n</tools>\n\n"
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{{\"name\": <function-name>, \"arguments\": <args-json-object>}}\n</tool_call>"
)


def tools_json(tools: Sequence[dict[str, Any]]) -> str:
    """The tools offered, as the first message's `tools` field carries them (the API and the chat
    write them alike, so both share a slot's prefix)."""
    return json.dumps(list(tools), ensure_ascii=False, sort_keys=True)


def renders_tools(tokenizer: Any) -> bool:
    """Whether the tokenizer's chat template writes the tools it is given."""
    msgs = [{"role": "user", "content": "x"}]
    try:
        text = tokenizer.apply_chat_template(msgs, tools=PROBE, tokenize=False)
    except Exception:
        return False
    return "omnidesk_probe_fn" in text


def call_text(name: str, arguments: str) -> str:
    """One call the Hermes way (what the constrained decoder writes too)."""
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": json.loads(arguments)}, ensure_ascii=False) + "\n</tool_call>"


def with_tools(messages: Sequence[Message], dicts: list[dict[str, Any]], native: bool) -> tuple[list[dict[str, Any]], list | None]:
    """(dicts, tools) for apply_chat_template: the tool fields of `messages` added to their dicts
    (one dict per message, plus a system dict in front where a non-native template needs the
    tools block and the first message is not a system message)."""
    tools = json.loads(messages[0].tools) if messages and messages[0].tools else None
    if not tools and not any(m.tool_calls or m.role == "tool" for m in messages):
        return dicts, None
    out = []
    for m, d in zip(messages, dicts):
        d = dict(d)
        if native:
            if m.tool_calls:
                d["tool_calls"] = [{"id": i, "type": "function", "function": {"name": n, "arguments": json.loads(a)}}
                                   for i, n, a in m.tool_calls]
            if m.role == "tool":
                d["tool_call_id"] = m.tool_call_id
                if m.name:
                    d["name"] = m.name
        else:
            if m.tool_calls:
                calls = "\n".join(call_text(n, a) for _, n, a in m.tool_calls)
                d["content"] = _joined(d["content"], calls)
            if m.role == "tool":
                d["content"] = _wrap(d["content"], "<tool_response>\n", "\n</tool_response>")
        out.append(d)
    if tools and not native:
        block = HERMES_TOOLS.format(tools="\n".join(json.dumps(t, ensure_ascii=False) for t in tools))
        if out[0]["role"] == "system":
            out[0]["content"] = _joined(out[0]["content"], block, "\n\n")
        else:
            out.insert(0, {"role": "system", "content": block})
        tools = None
    return out, tools


def _joined(content: Any, text: str, sep: str = "\n") -> Any:
    if isinstance(content, str):
        return content + sep + text if content else text
    return [*content, {"type": "text", "text": sep + text if content else text}]  # vision parts


def _wrap(content: Any, head: str, tail: str) -> Any:
    if isinstance(content, str):
        return head + content + tail
    return [{"type": "text", "text": head}, *content, {"type": "text", "text": tail}]
