"""Tools and tool rounds in the rendering: a template that writes tools itself gets them (and the
calls and results as dicts); ChatML, which ignores them, gets a Hermes block in the system prompt
and calls as <tool_call> text. Either way the chunks add up to the whole rendering, and the tools
are part of the first message's hash."""

import json

from desktop.model.chat_template import ChatTemplate
from desktop.model.messages import Message, prefix_hashes
from desktop.model.tiny import tiny_tokenizer

TOOLS = json.dumps([{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}])
NATIVE = (  # a small Qwen-like template that renders tools, calls and results itself
    "{% if tools %}<|im_start|>system\nTOOLS:{% for t in tools %}{{ t.function.name }};{% endfor %}<|im_end|>\n{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
    "{% if m.tool_calls %}{% for c in m.tool_calls %}CALL {{ c.function.name }} {{ c.function.arguments | tojson }}{% endfor %}{% endif %}"
    "{% if m.role == 'tool' %} FOR {{ m.tool_call_id }}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def rounds(first_role: str) -> list[Message]:
    return [Message(first_role, "hello", tools=TOOLS), Message("assistant", "", tool_calls=(("c1", "search", '{"q": "x"}'),)),
            Message("tool", "found it", tool_call_id="c1"), Message("assistant", "Done."), Message("user", "thanks")]


def test_chatml_gets_a_hermes_block_and_tool_call_text() -> None:
    t = ChatTemplate(tiny_tokenizer())
    assert not t.native_tools
    for first in ("system", "user"):
        msgs = rounds(first)
        text = t.render(msgs)
        assert text.startswith("<|im_start|>system\n") and '"name": "search"' in text and "<tools>" in text
        assert '<tool_call>\n{"name": "search", "arguments": {"q": "x"}}\n</tool_call>' in text
        assert "<tool_response>\nfound it\n</tool_response>" in text
        encoded = t.encode(msgs)
        assert encoded.bounds is not None and len(encoded.bounds) == len(msgs)  # chunks add up, message by message


def test_a_template_that_renders_tools_gets_them() -> None:
    tok = tiny_tokenizer()
    tok.chat_template = NATIVE
    t = ChatTemplate(tok)
    assert t.native_tools
    text = t.render(rounds("user"))
    assert "TOOLS:search;" in text and 'CALL search {"q": "x"}' in text and "found it FOR c1" in text
    assert "<tools>" not in text


def test_tools_are_part_of_the_first_messages_hash() -> None:
    plain, offered = Message("system", "s"), Message("system", "s", tools=TOOLS)
    other = Message("system", "s", tools=TOOLS.replace("search", "lookup"))
    assert len({prefix_hashes([m])[0] for m in (plain, offered, other)}) == 3
