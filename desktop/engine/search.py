"""Search over saved conversations: titles and message text, case-insensitive, every word of the
query anywhere in the conversation, with a snippet of the matching message. No Qt.

The case-folded text of each conversation is kept and rebuilt only when that conversation changed,
so a search over thousands of conversations is a scan of strings already in memory."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    from desktop.engine.conversations import Conversation

SNIPPET_CHARS = 70  # of message text around the first match


@dataclass(frozen=True, slots=True)
class Hit:
    """A conversation that matches; `word` is the first query word that its title does not show
    ("" when the title shows them all). `snippet()` is worked out only when asked (shown rows)."""

    conv: Conversation
    word: str = ""

    def snippet(self) -> str:
        """Text around `word` in the first message that has it ("" for none)."""
        if not self.word:
            return ""
        message = next((m.content for m in self.conv.messages if self.word in m.content.casefold()), "")
        return snippet(message, self.word) if message else ""


def _stamp(conv: Conversation) -> tuple:
    """Changes whenever the searchable text may have: a rename, a new message, a reply that grew."""
    last = conv.messages[-1].content if conv.messages else ""
    return conv.title, conv.updated, len(conv.messages), len(last), id(conv.messages[-1]) if conv.messages else 0


def terms(query: str) -> list[str]:
    """The words of a query, case-folded ("" → none)."""
    return query.casefold().split()


def snippet(text: str, word: str, width: int = SNIPPET_CHARS) -> str:
    """One line of `text` around the first occurrence of `word` (any case), "…" where cut."""
    found = re.search(re.escape(word), text, re.IGNORECASE)
    start = found.start() if found else 0
    lo = max(0, start - width // 3)
    if lo:
        space = text.rfind(" ", 0, lo + 1)
        lo = space + 1 if space >= 0 and lo - space < 12 else lo
    piece = " ".join(text[lo: lo + width].split())
    return ("…" if lo else "") + piece + ("…" if lo + width < len(text) else "")


class SearchIndex:
    """Folded text per conversation id, refreshed lazily by `search`."""

    def __init__(self) -> None:
        self._entries: dict[str, tuple[tuple, str, str]] = {}  # id → (stamp, folded title, folded messages)

    def _entry(self, conv: Conversation) -> tuple[str, str]:
        stamp = _stamp(conv)
        entry = self._entries.get(conv.id)
        if entry is None or entry[0] != stamp:
            body = "\n".join(m.content for m in conv.messages).casefold()
            entry = (stamp, (conv.title or "").casefold(), body)
            self._entries[conv.id] = entry
        return entry[1], entry[2]

    def search(self, convs: Iterable[Conversation], query: str) -> list[Hit]:
        """The conversations (in the order given) whose title and messages together contain
        every word of `query`; all of them for an empty query."""
        words = terms(query)
        convs = list(convs)
        if not words:
            return [Hit(c) for c in convs]
        hits = []
        for conv in convs:
            title, body = self._entry(conv)
            if all(w in title or w in body for w in words):
                unseen = [w for w in words if w not in title]  # the title already shows the others
                hits.append(Hit(conv, unseen[0] if unseen else ""))
        self._forget(convs)
        return hits

    def _forget(self, convs: list[Conversation]) -> None:
        """Drop entries of conversations that are gone (deleted) when the index has grown past them."""
        if len(self._entries) > 2 * len(convs) + 64:
            alive = {c.id for c in convs}
            self._entries = {k: v for k, v in self._entries.items() if k in alive}
