"""Edits as branches of one conversation (no Qt). Editing user message k keeps that message and every
message after it as a branch, and a new branch starts there with the edited text. The shown branch's
messages are the conversation's own `messages` (what the next turn continues from); the others sit
on message k: `StoredMessage.branches` in their order, `StoredMessage.branch` where the shown one
sits among all of them (0-based). A message of a kept branch may hold branches of its own."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from desktop.chat import reply_versions

if TYPE_CHECKING:
    from desktop.chat.conversations import Conversation, StoredMessage


@dataclass(slots=True)
class Branch:
    """A branch that is not shown: its user message (the one edited) and the messages after it."""

    messages: list[StoredMessage]


@dataclass(frozen=True, slots=True)
class Edit:
    """An edit made by `edit`: at message `index`, the branch shown before it was `before`."""

    index: int
    before: int


def count(msg: StoredMessage) -> int:
    """How many branches start at this message (1 when it was never edited)."""
    return len(msg.branches) + 1


def position(msg: StoredMessage) -> tuple[int, int]:
    """The switcher of a message, (shown, of how many), both 0-based and 1-based as the widget
    takes them: a user message's branches, a reply's versions."""
    if msg.role == "user":
        return _at(msg), count(msg)
    return msg.shown, reply_versions.count(msg)


def edit(conv: Conversation, index: int, text: str, images: list[str] | None = None) -> Edit:
    """Branch `conv` at user message `index`: that message and those after it are kept as a branch
    in their place among the others, and a new user message with `text` (its images, and any
    attached while editing) ends the conversation, shown, the last branch. Nothing is saved here.
    ValueError when `index` is not one of its user messages."""
    if not 0 <= index < len(conv.messages) or conv.messages[index].role != "user":
        raise ValueError(f"Message {index} is not a user message of this conversation.")
    old = conv.messages[index]
    at = _at(old)
    kept = Branch([_bare(old)] + conv.messages[index + 1:])
    everyone = old.branches[:at] + [kept] + old.branches[at:]
    merged = list(old.images) + [p for p in images or [] if p not in old.images]
    head = type(old)("user", text, images=merged, branches=everyone, branch=len(everyone))
    conv.messages[index:] = [head]
    return Edit(index, at)


def switch(conv: Conversation, index: int, to: int) -> bool:
    """Show branch `to` (0-based) of user message `index`: the messages from `index` on become that
    branch's, the ones shown until now are kept in their place. False (nothing changes) when it is
    out of range or already shown."""
    if not 0 <= index < len(conv.messages) or conv.messages[index].role != "user":
        return False
    msg = conv.messages[index]
    at = _at(msg)
    if not 0 <= to < count(msg) or to == at:
        return False
    current = Branch([_bare(msg)] + conv.messages[index + 1:])
    everyone = msg.branches[:at] + [current] + msg.branches[at:]
    _show(conv, index, everyone, to)
    return True


def undo(conv: Conversation, made: Edit) -> StoredMessage | None:
    """Take back an edit whose branch got no reply (it failed): the branch it made goes and the
    one shown before comes back, as it was. Returns the edited message taken out (None, and
    nothing changes, when the conversation no longer ends with it)."""
    i = made.index
    if i != len(conv.messages) - 1 or conv.messages[i].role != "user" or _at(conv.messages[i]) != len(conv.messages[i].branches):
        return None
    taken = conv.messages[i]
    if not 0 <= made.before < len(taken.branches):
        return None
    _show(conv, i, list(taken.branches), made.before)
    return _bare(taken)


def _show(conv: Conversation, index: int, everyone: list[Branch], to: int) -> None:
    """Put branch `to` of `everyone` in place from `index` on; the others stay on its first message."""
    chosen = everyone[to]
    rest = everyone[:to] + everyone[to + 1:]
    # a new object: a save of the conversation taken before may still be reading the old ones
    head = dataclasses.replace(chosen.messages[0], branches=rest, branch=to)
    conv.messages[index:] = [head] + chosen.messages[1:]


def _at(msg: StoredMessage) -> int:
    return min(max(msg.branch, 0), len(msg.branches))


def _bare(msg: StoredMessage) -> StoredMessage:
    """The message as kept in a branch: without the branches, which stay with the shown one."""
    return dataclasses.replace(msg, branches=[], branch=0)
