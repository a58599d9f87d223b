"""Prefill while the user types: at each pause the conversation plus the draft goes to the engine
as a warm (a chat with max_tokens 0), so that Send reads only what changed since."""

from __future__ import annotations

import logging
from typing import Any

from desktop.chat.conversations import Conversation
from desktop.chat.reply import request_messages
from desktop.model.tool_render import tools_json
from desktop.errors import OmnideskError
from desktop.model.params import SamplingParams
from desktop.protocol import Done
from desktop.protocol.engine import EngineApi, RequestEvents
from desktop.tasks import TaskSet

log = logging.getLogger(__name__)

WARM = SamplingParams(max_tokens=0)  # prefill only


def draft_messages(conv: Conversation, text: str, tools: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """What Send will ask with this draft: the conversation, then the draft as the user's message
    (stripped, as the composer sends it), with the tools the turn will offer on the first message."""
    out = request_messages(conv) + [{"role": "user", "content": text.strip()}]
    if tools:
        out[0]["tools"] = tools_json(tools)
    return out


class DraftWarmer:
    """Sends the warms of the drafts typed in conversations (the page calls `warm` after a pause
    in typing) and follows them (on `tasks`), per conversation. The engine gives a warm the
    lowest priority (it never delays a reply, and a newer one of the same conversation replaces
    it), so a warm may end without having done anything: that costs nothing."""

    def __init__(self, engine: EngineApi, tasks: TaskSet) -> None:
        self.engine, self.tasks = engine, tasks
        self._warmed: dict[str, str] = {}  # conversation id → the draft last sent as a warm
        self._placed: set[str] = set()  # conversations a warm of whose draft reached a slot

    def warm(self, conv: Conversation, text: str, tools: list[dict[str, Any]] | None = None) -> bool:
        """Prefill `conv` with the draft `text` (nothing for an empty draft, one already warmed,
        or a conversation that does not end with a reply); True when a warm was sent."""
        draft = text.strip()
        if not draft or self._warmed.get(conv.id) == draft:
            return False
        if conv.messages and conv.messages[-1].role != "assistant":  # the turn before is unanswered
            return False
        try:
            stream = self.engine.chat(draft_messages(conv, draft, tools), WARM, conversation=conv.id)
        except OmnideskError as exc:  # not ready, too long, …: Send will say; a warm just does not happen
            log.debug("No warm for conversation %s: %s", conv.id, exc.message)
            return False
        except Exception:  # a warm only saves time: whatever goes wrong with one must not reach the window
            log.warning("A warm of conversation %s failed", conv.id, exc_info=True)
            return False
        self._warmed[conv.id] = draft
        self.tasks.spawn(self._follow(conv.id, stream))
        return True

    async def _follow(self, conv_id: str, stream: RequestEvents) -> None:
        async for event in stream:
            placed = isinstance(event, Done) and event.stats.slot >= 0  # skipped ones name no slot
            if placed and conv_id in self._warmed:
                self._placed.add(conv_id)

    def sent(self, conv: Conversation) -> bool:
        """The draft of `conv` is being sent: whether a warm of it was prefilled while it was typed
        (the reply then says how much of it the cache held). Forgets the draft."""
        self._warmed.pop(conv.id, None)
        placed = conv.id in self._placed
        self._placed.discard(conv.id)
        return placed
