"""A chat turn with a tool round on the tiny model (a real worker): the reply that made the call
comes back in the next round's request as the text it generated, so the slot's KV covers the whole
first round and only the tool result and the new reply's header are read (the promise: a
conversation never pays for its history twice). The call is constrained by the grammar the API
uses, so the tiny model writes a valid one."""

from __future__ import annotations

import asyncio
import json

from tool_script import Box

from desktop.chat.conversations import ConversationStore, StoredMessage
from desktop.chat.reply import Reply
from desktop.chat.tool_rounds import ONCE, ToolRounds
from desktop.gateway.gateway import Gateway
from desktop.model.grammar import tool_call_grammar
from desktop.model.loader import ModelSpec
from desktop.model.params import SamplingParams
from desktop.workers.config import WorkerConfig
from desktop.workers.thread_host import ThreadHost


FLAG = {"type": "function", "function": {"name": "add", "description": "Add one.", "parameters": {
    "type": "object", "properties": {"x": {"type": "boolean"}}, "required": ["x"], "additionalProperties": False}}}


class FlagBox(Box):
    def specs(self):
        return [FLAG]


def test_the_next_round_reads_only_the_tool_result(tmp_path):
    replies: list[Reply] = []

    async def main() -> None:
        gw = Gateway([ThreadHost("w0", ModelSpec("tiny"), WorkerConfig(num_slots=2, cache_min_tokens=8), threads=1)])
        await gw.start()
        assert await gw.wait_ready(60)
        try:
            store = ConversationStore(tmp_path)
            conv = store.new("You add numbers with tools.")
            Reply.ask(store, conv, StoredMessage("user", "What is 2 + 3?"))
            grammar = tool_call_grammar([FLAG["function"]])  # a short call the tiny model must finish

            def start(tools):
                params = SamplingParams(temperature=0.0, max_tokens=200, grammar="" if replies else grammar)
                reply = Reply(gw, store, conv, params, tools=tools)
                replies.append(reply)
                asyncio.ensure_future(reply.run())
                return reply

            async def approve(info):
                return ONCE

            box = FlagBox()
            await ToolRounds(start, store, conv, box, approve).run()
            assert len(box.ran) == 1 and box.ran[0][0] == "add", (replies[0].text, replies[0].stats, replies[0].error)
        finally:
            await gw.close()

    asyncio.run(main())
    first, second = replies[0].stats, replies[1].stats
    assert replies[0].text.startswith("<tool_call>")
    read_before = first["input_tokens"] + first["generated_tokens"]
    assert second["cached_tokens"] >= read_before - 1, (first, second)  # the sampled last token may be read again
    new = second["input_tokens"] - second["cached_tokens"]
    assert new < 80 and new < read_before / 4, (first, second)  # the tool result and its framing (the tiny tokenizer spends
    # about a token a character), never the 600-odd tokens of history
