"""A chat turn with tools, without Qt: each round a Reply is written with the tools offered; when
the model's reply holds tool calls (read as the API reads them: desktop/model/tool_calls.py), each
call is shown to the user, who approves it once, always for that tool, or denies it, before it
runs; the results go into the conversation as tool messages (Reply.answer_tools) and the next
round's Reply continues. The reply that made the calls stays as the text the model generated, so
the next round's request shares its prefix with the slot's KV and only the results are read.

Nothing runs without approval, except a tool the user chose "Always" for (`always`, shared by the
caller across turns). A call that fails, hangs or is denied still gets a tool message saying so:
the model reads it and the reply goes on."""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Protocol

from desktop.chat.conversations import Conversation, ConversationStore, StoredMessage
from desktop.chat.reply import Phase, Reply
from desktop.model.tool_calls import marker_at, parse

ONCE, ALWAYS, DENY = "once", "always", "deny"
MAX_ROUNDS = 8  # tool rounds in one turn; then the turn ends with the last reply as it is
DENIED = "The user did not allow this call."


class ToolBox(Protocol):
    """What the rounds need of the tools (desktop/tools/manager.ToolManager fits)."""

    def specs(self) -> list[dict[str, Any]]: ...

    async def call(self, name: str, arguments: str) -> Any: ...  # .text, .ok, .seconds


@dataclass
class ToolCallInfo:
    """One call as a card shows it; `state` is asking, running, done, failed or denied."""

    id: str
    name: str
    arguments: str
    state: str = "asking"
    result: str = ""
    seconds: float = 0.0
    decision: str = ""
    at: float = field(default_factory=time.time)

    def record(self) -> dict[str, Any]:
        """What the tool message keeps of it (StoredMessage.call)."""
        return {"id": self.id, "name": self.name, "arguments": self.arguments, "ok": self.state == "done",
                "seconds": round(self.seconds, 3), "decision": self.decision}


Approve = Callable[[ToolCallInfo], Awaitable[str]]  # ONCE | ALWAYS | DENY
StartReply = Callable[[list[dict[str, Any]]], Reply]  # a running Reply offering these tools
Listener = Callable[["ToolRounds", str, Any], None]  # (rounds, "reply" | "call" | "limit", the Reply or ToolCallInfo)


class ToolRounds:
    """One turn's tool rounds. `start(tools)` makes the round's Reply and starts it running (the
    chat's Turns does, so each round is drawn like any reply; the first may be a Regenerate or an
    edit); `approve(call)` asks the user. `run()` returns when a reply makes no calls, fails or is
    stopped, or after `max_rounds`."""

    def __init__(self, start: StartReply, store: ConversationStore, conv: Conversation, toolbox: ToolBox,
                 approve: Approve, *, always: set[str] | None = None, max_rounds: int = MAX_ROUNDS) -> None:
        self.start, self.store, self.conv, self.toolbox, self.approve = start, store, conv, toolbox, approve
        self.always = always if always is not None else set()
        self.max_rounds = max_rounds
        self.listeners: list[Listener] = []
        self.calls: list[ToolCallInfo] = []
        self.reply: Reply | None = None
        self.rounds = 0
        self._stopped = False

    def stop(self) -> None:
        """No more rounds: a call waiting for approval is denied, one running is left to end."""
        self._stopped = True

    async def run(self) -> None:
        tools = self.toolbox.specs()
        while True:
            reply = self.reply = self.start(tools)
            names = [t["function"]["name"] for t in reply.tools]  # what this round offered
            self.rounds += 1
            self._tell("reply", reply)
            await _ended(reply)
            await reply.saved()  # its text is on disk before any call runs
            if self._stopped or reply.phase is not Phase.DONE or not reply.text or reply.index < 0:
                return
            parsed = parse(reply.text, names) if names else None
            if parsed is None:
                return
            if self.rounds >= self.max_rounds:
                self._tell("limit", reply)
                return
            results = [await self._one(name, arguments) for name, arguments in
                       ((c.name, c.arguments) for c in parsed.calls)]
            if self.conv.id not in self.store:  # deleted meanwhile: nothing is written back
                return
            Reply.answer_tools(self.store, self.conv, results)
            if self._stopped:
                return

    async def _one(self, name: str, arguments: str) -> StoredMessage:
        info = ToolCallInfo(f"call_{secrets.token_hex(6)}", name, arguments)
        self.calls.append(info)
        decision = DENY if self._stopped else ALWAYS if name in self.always else ""
        if decision:
            info.state = "running" if decision == ALWAYS else "denied"
        self._tell("call", info)
        if not decision:
            decision = await self.approve(info)
        info.decision = decision
        if decision == ALWAYS:
            self.always.add(name)
        if decision not in (ONCE, ALWAYS) or self._stopped:
            info.state, info.result = "denied", DENIED
        else:
            info.state = "running"
            self._tell("call", info)
            result = await self.toolbox.call(name, arguments)
            info.state = "done" if result.ok else "failed"
            info.result, info.seconds = result.text, result.seconds
        self._tell("call", info)
        return StoredMessage("tool", info.result, call=info.record())

    def _tell(self, what: str, payload: Any) -> None:
        for listener in list(self.listeners):
            listener(self, what, payload)


async def _ended(reply: Reply) -> None:
    """Wait until `reply` has ended (its run is driven by whoever started it)."""
    if reply.ended:
        return
    done = asyncio.get_running_loop().create_future()

    def on(r: Reply, what: str) -> None:
        if what in ("done", "failed") and not done.done():
            done.set_result(None)

    reply.listeners.append(on)
    try:
        await done
    finally:
        reply.listeners.remove(on)


def prose(text: str, names: list[str] | None = None) -> str:
    """A reply's text without the calls it made (what a bubble shows; the calls show as cards).
    With no names given, any function name counts; a Hermes call still being written is cut too."""
    parsed = parse(text, names) if names is not None else _any_call(text)
    if parsed is not None:
        return parsed.content
    cut = marker_at(text)
    return text[:cut].rstrip() if cut >= 0 else text


def _any_call(text: str) -> Any:
    found = re.findall(r'"name"\s*:\s*("(?:[^"\\]|\\.)*")', text)
    try:
        names = [json.loads(n) for n in found]
    except ValueError:
        return None
    return parse(text, names) if names else None
