"""A finished call as a chat conversation: the user's turns and the assistant's replies as they
were heard (a barge-in keeps only what was heard), saved in the conversation store (no Qt)."""

from __future__ import annotations

import logging
from typing import Any, Iterable

from desktop.chat.conversations import Conversation, ConversationStore, StoredMessage, title_from

log = logging.getLogger(__name__)
TITLE_PREFIX = "Call · "


def call_messages(turns: Iterable[Any]) -> list[tuple[str, str]]:
    """(role, text) pairs from a call's TurnMetrics, alternating user/assistant: a reply cut
    before anything was heard leaves no message, and the user's next words join their last."""
    out: list[tuple[str, str]] = []
    for turn in turns:
        said = " ".join(str(getattr(turn, "user_text", "") or "").split())
        heard = getattr(turn, "heard", None)
        reply = (heard if heard is not None else getattr(turn, "assistant_text", "")) or ""
        reply = reply.strip()
        if said:
            if out and out[-1][0] == "user":
                out[-1] = ("user", f"{out[-1][1]}\n{said}")
            else:
                out.append(("user", said))
        if reply and out and out[-1][0] == "user":
            out.append(("assistant", reply))
    return out


def call_title(messages: list[tuple[str, str]]) -> str:
    """"Call · " and the first words the user said."""
    first = next((text for role, text in messages if role == "user"), "")
    return TITLE_PREFIX + title_from(first)


def save_call(store: ConversationStore, turns: Iterable[Any], system_prompt: str = "",
              preset: str = "") -> Conversation | None:
    """Save the call's exchange as a new conversation (continued by typing in Chat); None when
    nobody said anything. Keeps the call's system prompt (the model saw the call under it) and
    the id of the preset it came from."""
    messages = call_messages(turns)
    if not any(role == "user" for role, _ in messages):
        return None
    conv = store.new(system_prompt=system_prompt or "", preset=preset)
    conv.title = call_title(messages)
    conv.messages.extend(StoredMessage(role, text) for role, text in messages)
    store.save(conv)
    log.info("The call was saved as the conversation %s (%d messages)", conv.id, len(messages))
    return conv
