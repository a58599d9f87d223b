"""The terminal chat's conversation, kept in the window's store (chat/conversations.py): saved
after every message, found again by `--resume` (the newest, or by id or title prefix), listed by /list."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from desktop.chat.conversations import Conversation, ConversationStore, StoredMessage
from desktop.chat.reply import request_messages
from desktop.chat.reply_versions import succeed

LIST_MAX = 20  # conversations listed by /list and --list (the newest)
ID_PREFIX_MIN = 4  # a shorter --resume query is only looked for in titles


def find(store: ConversationStore, query: str) -> Conversation | None:
    """The conversation `--resume QUERY` means: the newest for an empty query, else the one with
    that id, or the only one whose id starts with it (4 characters or more), or the newest whose
    title starts with it (any case)."""
    convs = store.list()
    query = query.strip()
    if not query:
        return convs[0] if convs else None
    exact = store.get(query)
    if exact is not None:
        return exact
    by_id = [c for c in convs if c.id.startswith(query.lower())] if len(query) >= ID_PREFIX_MIN else []
    if len(by_id) == 1:
        return by_id[0]
    folded = query.casefold()
    return next((c for c in convs if c.title.casefold().startswith(folded)), None)


def listing(store: ConversationStore, limit: int = LIST_MAX) -> str:
    """The newest saved conversations, one a line: short id (what --resume takes), when, title."""
    convs = store.list()
    if not convs:
        return "No saved conversations yet."
    lines = [f"{c.id[:8]}  {time.strftime('%Y-%m-%d %H:%M', time.localtime(c.updated))}  "
             f"{c.title or '(untitled)'}  ({_count(len(c.messages))})" for c in convs[:limit]]
    if len(convs) > limit:
        lines.append(f"… and {len(convs) - limit} older")
    return "\n".join(lines + ["Continue one with: omnidesk chat --resume ID (or the start of its title)"])


def _count(n: int) -> str:
    return f"{n} message{'s' if n != 1 else ''}"


@dataclass
class TerminalConversation:
    """One conversation of the terminal chat and the store it is saved in after every change
    (through the store's public API only: new, save, get, list)."""

    store: ConversationStore
    conv: Conversation

    @classmethod
    def start(cls, store: ConversationStore, system_prompt: str, preset: str = "") -> TerminalConversation:
        return cls(store, store.new(system_prompt, preset))

    @property
    def saved(self) -> bool:
        return self.conv.id in self.store

    def describe(self) -> str:
        """Where the conversation is, for the user: its title and how to come back to it."""
        title = self.conv.title or "(untitled)"
        return f"Saved as “{title}” ({self.conv.id[:8]}); omnidesk chat --resume {self.conv.id[:8]} continues it."

    def recap(self, images: bool) -> str:
        """What a resumed conversation is: its title, its length, its last exchange (shortened);
        `images`: whether the model sees images."""
        messages = self.conv.messages
        lines = [f"Resumed “{self.conv.title or '(untitled)'}”: {_count(len(messages))}."]
        for m in messages[-2:]:
            text = " ".join(m.content.split())
            lines.append(f"  {'you' if m.role == 'user' else m.role}> {text[:200] + '…' if len(text) > 200 else text}")
        if messages and messages[-1].role == "user":
            lines.append("  (its last message has no reply: /regen writes one)")
        if self.has_images() and not images:
            lines.append("  (its images are left out: this model reads text only)")
        return "\n".join(lines)

    def request(self, images: bool) -> list[dict[str, Any]]:
        """The messages to send (as the window sends them); `images`: whether the model sees
        them (else a message's images are left out and its text is sent alone)."""
        messages = request_messages(self.conv)
        if images:  # the stored images read and decoded (only the store's own files, as the window does)
            return self.store.images.resolve(messages)
        for m in messages:
            if isinstance(m["content"], list):
                m["content"] = next((p["text"] for p in m["content"] if p.get("type") == "text"), "")
        return messages

    def has_images(self) -> bool:
        return any(m.images for m in self.conv.messages)

    def add_user(self, text: str) -> None:
        self.conv.messages.append(StoredMessage(role="user", content=text))
        self.save()

    def add_reply(self, text: str, stats: Any = None, replaces: StoredMessage | None = None) -> None:
        """A finished (or stopped) reply, with its TokenStats; `replaces`: the reply it was
        regenerated from, kept as one of its versions (as the window's Regenerate keeps it)."""
        reply = StoredMessage(role="assistant", content=text, stats=asdict(stats) if stats is not None else None)
        if replaces is not None:
            succeed(reply, replaces)
        self.conv.messages.append(reply)
        self.save()

    def take_reply(self) -> StoredMessage | None:
        """Take the last reply off to regenerate it (not saved: until the new one is, the file
        keeps it); None when the conversation does not end with a reply."""
        if self.last_role() != "assistant":
            return None
        return self.conv.messages.pop()

    def put_back(self, reply: StoredMessage | None) -> None:
        """A reply taken to regenerate, back where it was (the new one failed)."""
        if reply is not None:
            self.conv.messages.append(reply)

    def last_role(self) -> str | None:
        return self.conv.messages[-1].role if self.conv.messages else None

    def drop_last(self) -> None:
        """Remove the last message (one whose reply failed)."""
        if self.conv.messages:
            self.conv.messages.pop()
            self.save()

    def save(self) -> None:
        """Write it (an empty conversation is never listed)."""
        if self.conv.messages or self.saved:
            self.store.save(self.conv)
