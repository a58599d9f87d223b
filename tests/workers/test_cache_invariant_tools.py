"""The cache invariant over random agent conversations: tools offered on the first message (and
changed mid-way), assistant turns that carry tool calls (given as tool_calls, or as the text the
model generated), tool results, and replies constrained to a tool call by a grammar: the output
with the KV cache equals an uncached run (greedy, fp32; the uncached one masked by the same grammar)."""

from __future__ import annotations

import json

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from worker_helpers import make_client

from desktop.model import kv
from desktop.model.grammar import Grammars, tool_call_grammar
from desktop.model.messages import Message
from desktop.model.params import SamplingParams
from desktop.protocol import Chat, Done

TOOLS = [
    [{"type": "function", "function": {"name": "search", "parameters": {
        "type": "object", "properties": {"q": {"type": "string", "maxLength": 4}}, "required": ["q"]}}}],
    [{"type": "function", "function": {"name": "add", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["a"]}}}],
]
TEXT = st.text(alphabet=list("abcdefghij klm.,?é\n<>/{}\""), min_size=1, max_size=20)
OPS = st.one_of(
    st.tuples(st.just("turn"), TEXT),
    st.tuples(st.just("call"), st.integers(0, 1), TEXT, TEXT),  # a structured call, then its result
    st.tuples(st.just("generated"), TEXT),  # the reply as generated, then a result for it
    st.tuples(st.just("constrained"), TEXT),  # a reply constrained to a call of the current tools
    st.tuples(st.just("tools"), st.integers(0, 2)),  # the tools offered change (2: none)
)
MAX = 5
CONSTRAINED_MAX = 12


class MaskedOracle:
    """Uncached greedy generation, each step masked by the grammar when one is given."""

    def __init__(self, lm) -> None:
        self.lm, self.grammars = lm, Grammars(lm.template.tokenizer, lm.template.eos_ids)

    @torch.no_grad()
    def chat(self, msgs: list[Message], max_tokens: int, grammar: str = "") -> list[int]:
        model, template = self.lm.model, self.lm.template
        constraint = self.grammars.constraint(grammar) if grammar else None
        cache = kv.new_cache(model.config)
        logits = model(input_ids=torch.tensor([template.prompt_ids(msgs)]), past_key_values=cache, use_cache=True).logits[0, -1]
        out: list[int] = []
        while True:
            x = constraint.mask(logits.float()) if constraint else logits
            token = int(torch.argmax(x))
            if constraint:
                constraint.advance(token)
            out.append(token)
            if token in template.eos_ids or len(out) >= max_tokens:
                return out
            logits = model(input_ids=torch.tensor([[token]]), past_key_values=cache, use_cache=True).logits[0, -1]


@pytest.fixture(scope="module")
def masked(tiny_lm) -> MaskedOracle:
    return MaskedOracle(tiny_lm)


def with_tools(conv: list[Message], which: int) -> None:
    first = conv[0]
    tools = json.dumps(TOOLS[which]) if which < len(TOOLS) else ""
    conv[0] = Message(first.role, first.content, first.images, tools=tools)


@pytest.mark.parametrize("runner", ["hf", "static"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(mode=st.sampled_from(["imc+spc", "imc", "off"]), num_slots=st.integers(1, 2), ops=st.lists(OPS, min_size=1, max_size=7))
def test_tool_rounds_cached_equal_uncached(tiny_lm, masked, mode, num_slots, ops, runner):
    client = make_client(tiny_lm, num_slots=num_slots, cache_mode=mode, cache_min_tokens=8, prefill_chunk=16,
                         prefill_budget=24, runner=runner)
    conv = [Message("system", "You call tools.", tools=json.dumps(TOOLS[0]))]
    offered = 0
    for n, op in enumerate(ops):
        if op[0] == "tools":
            offered = op[1]
            with_tools(conv, offered)
            continue
        if op[0] == "call":
            name, key = ("search", "q") if offered != 1 else ("add", "a")
            args = json.dumps({key: op[2][:4] if key == "q" else len(op[2]) % 10})
            conv.append(Message("assistant", "", tool_calls=((f"c{n}", name, args),)))
            conv.append(Message("tool", op[3], tool_call_id=f"c{n}"))
            continue
        if conv[-1].role == "assistant":
            conv.append(Message("user", op[1]))
        elif conv[-1].role == "system":
            conv.append(Message("user", op[1]))
        grammar = tool_call_grammar([t["function"] for t in TOOLS[offered]]) if op[0] == "constrained" and offered < 2 else ""
        limit = CONSTRAINED_MAX if grammar else MAX
        events = client.run(Chat(f"r{n}", tuple(conv), SamplingParams(max_tokens=limit, grammar=grammar)))
        done = events[-1]
        assert isinstance(done, Done), done
        assert list(done.token_ids) == masked.chat(conv, limit, grammar), (mode, op, done.stats)
        conv.append(Message("assistant", done.text))
        if op[0] == "generated":
            conv.append(Message("tool", op[1], tool_call_id=f"g{n}", name="search"))  # the chat's tool rounds (chat/tool_rounds.py)
