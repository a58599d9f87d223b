"""The chat's tool rounds (chat/tool_rounds.py) with a scripted gateway, no model: calls read as
the API reads them, asked before they run (once / always / deny), their results sent back as tool
messages after the reply's own generated text, and the turn going on to the final answer."""

from __future__ import annotations

import asyncio
import json

from desktop.chat.conversations import ConversationStore, StoredMessage
from desktop.chat.reply import Reply
from desktop.chat.tool_rounds import ALWAYS, DENIED, DENY, ONCE, ToolRounds, prose
from desktop.model.messages import parse_messages
from desktop.model.params import SamplingParams
from desktop.model.tool_render import call_text
from gw_helpers import run
from tool_script import ADD, Box, Gateway

def rounds_for(tmp_path, replies, decisions, box=None, always=None):
    store = ConversationStore(tmp_path)
    conv = store.new("Use tools.")
    Reply.ask(store, conv, StoredMessage("user", "What is 2 + 3?"))
    gw = Gateway(replies)
    asked = []

    async def approve(info):
        asked.append(info.name)
        return decisions.pop(0)

    tasks = []

    def start(tools):
        reply = Reply(gw, store, conv, SamplingParams(), tools=tools)
        tasks.append(asyncio.ensure_future(reply.run()))
        return reply

    box = box or Box()
    return ToolRounds(start, store, conv, box, approve, always=always), gw, box, asked, conv, store


CALL = "Let me add.\n" + call_text("add", json.dumps({"a": 2, "b": 3}))


def test_an_approved_call_runs_and_the_reply_continues_from_its_own_text(tmp_path):
    rounds, gw, box, asked, conv, store = rounds_for(tmp_path, [CALL, "It is 5."], [ONCE])
    run(rounds.run())
    assert asked == ["add"] and box.ran == [("add", {"a": 2, "b": 3})]
    assert [(m.role, m.content) for m in conv.messages] == [
        ("user", "What is 2 + 3?"), ("assistant", CALL), ("tool", "5"), ("assistant", "It is 5.")]
    first, second = gw.sent
    assert json.loads(first[0]["tools"]) == [ADD] and first[0]["role"] == "system"
    assert second[:len(first)] == first  # the same prefix: the slot's KV holds it
    assert second[2] == {"role": "assistant", "content": CALL}  # the generated text, verbatim
    assert second[3]["role"] == "tool" and second[3]["content"] == "5"
    assert second[3]["tool_call_id"] == conv.messages[2].call["id"]
    parse_messages(second)  # what the gateway checks: the tool message answers the call before it
    saved = ConversationStore(tmp_path).get(conv.id)
    assert saved.messages[2].call == conv.messages[2].call and saved.messages[2].call["ok"] is True
    assert prose(CALL) == "Let me add." and prose("It is 5.") == "It is 5."


def test_a_denied_call_does_not_run_and_the_model_is_told(tmp_path):
    rounds, gw, box, asked, conv, _ = rounds_for(tmp_path, [CALL, "I could not add."], [DENY])
    run(rounds.run())
    assert box.ran == [] and conv.messages[2].content == DENIED and conv.messages[2].call["decision"] == DENY
    assert rounds.calls[0].state == "denied"


def test_always_skips_the_question_next_time(tmp_path):
    always = set()
    rounds, gw, box, asked, conv, _ = rounds_for(tmp_path, [CALL, CALL, "Done."], [ALWAYS], always=always)
    run(rounds.run())
    assert asked == ["add"] and len(box.ran) == 2 and always == {"add"}


def test_a_failed_call_goes_back_to_the_model_as_text(tmp_path):
    box = Box({"add": ("The server x stopped while running add.", False)})
    rounds, gw, box, asked, conv, _ = rounds_for(tmp_path, [CALL, "Sorry."], [ONCE], box=box)
    run(rounds.run())
    assert conv.messages[2].content.startswith("The server x stopped") and conv.messages[2].call["ok"] is False
    assert conv.messages[-1].content == "Sorry." and rounds.calls[0].state == "failed"


def test_a_reply_without_calls_ends_the_turn_in_one_round(tmp_path):
    rounds, gw, box, asked, conv, _ = rounds_for(tmp_path, ["Five."], [])
    run(rounds.run())
    assert rounds.rounds == 1 and asked == [] and len(gw.sent) == 1


def test_rounds_stop_at_the_limit(tmp_path):
    rounds, gw, box, asked, conv, _ = rounds_for(tmp_path, [CALL] * 3, [ONCE] * 3)
    rounds.max_rounds = 2
    seen = []
    rounds.listeners.append(lambda r, what, x: seen.append(what))
    run(rounds.run())
    assert rounds.rounds == 2 and len(box.ran) == 1 and seen[-1] == "limit"


def test_a_call_to_a_tool_not_offered_is_text(tmp_path):
    other = "<tool_call>\n" + json.dumps({"name": "rm", "arguments": {}}) + "\n</tool_call>"
    rounds, gw, box, asked, conv, _ = rounds_for(tmp_path, [other], [])
    run(rounds.run())
    assert asked == [] and box.ran == [] and conv.messages[-1].content == other


def test_a_conversation_deleted_while_a_call_waits_gets_nothing_written(tmp_path):
    rounds, gw, box, asked, conv, store = rounds_for(tmp_path, [CALL, "x"], [])

    async def approve(info):
        store.delete(conv.id)
        return ONCE

    rounds.approve = approve
    run(rounds.run())
    assert conv.id not in store and not (tmp_path / f"{conv.id}.json").exists()
    assert len(gw.sent) == 1


def test_a_draft_warm_offers_the_same_tools_as_the_turn(tmp_path):
    from desktop.chat.draft_warm import draft_messages

    rounds, gw, box, asked, conv, store = rounds_for(tmp_path, ["Five."], [])
    run(rounds.run())
    warm = draft_messages(conv, "And 3 + 4?", [ADD])
    turn = Reply(Gateway(["x"]), store, conv, SamplingParams(), tools=[ADD])._request
    assert warm[:-1] == turn and warm[0]["tools"] == gw.sent[0][0]["tools"]
