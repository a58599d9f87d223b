"""Search over saved conversations: titles and message text, case-insensitive, every word of the
query anywhere in the conversation, with a snippet of the matching message (the latest that has
the most of the words: the conversation opens there, the words marked). No Qt.

The case-folded text of each conversation is kept and rebuilt only when that conversation changed,
so a search over thousands of conversations is a scan of strings already in memory."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Sequence

if TYPE_CHECKING:
    from desktop.chat.conversations import Conversation

SNIPPET_CHARS = 70  # of message text around the first match


@dataclass(frozen=True, slots=True)
class Hit:
    """A conversation that matches; `word` is the first query word that its title does not show
    ("" when the title shows them all), `words` every word of the query. `snippet()` is worked
    out only when asked (shown rows). `message_index()`: the message the search leads to."""

    conv: Conversation
    word: str = ""
    words: tuple[str, ...] = ()

    def message_index(self) -> int | None:
        return match_index(self.conv.messages, self.words or ((self.word,) if self.word else ()))

    def snippet(self) -> str:
        """Text around `word` (else the first query word it has) in that message; "" when the
        title shows every word."""
        index = self.message_index() if self.word else None
        if index is None:
            return ""
        text = self.conv.messages[index].content
        folded = text.casefold()
        word = self.word if self.word in folded else next((w for w in self.words if w in folded), self.word)
        return snippet(text, word)


def _stamp(conv: Conversation) -> tuple:
    """Changes whenever the searchable text may have: a rename, a new message, a reply that grew."""
    last = conv.messages[-1].content if conv.messages else ""
    return conv.title, conv.updated, len(conv.messages), len(last), id(conv.messages[-1]) if conv.messages else 0


def terms(query: str) -> list[str]:
    """The words of a query, case-folded ("" → none)."""
    return query.casefold().split()


def snippet(text: str, word: str, width: int = SNIPPET_CHARS) -> str:
    """One line of `text` around the first occurrence of `word` (any case), "…" where cut. It is
    cut only between words (a single word longer than the line aside): it never starts or ends
    with a piece of a word."""
    line = " ".join(text.split())
    if len(line) <= width:
        return line
    found = re.search(re.escape(" ".join(word.split())), line, re.IGNORECASE)
    start = found.start() if found else 0
    lo = min(max(0, start - width // 3), len(line) - width)  # the match a third in; no room wasted at the end
    lo = 0 if lo <= 12 else lo  # a match near the start: from the start
    if lo > 0 and line[lo - 1] != " ":  # inside a word: from its start, or the next word's
        back = line.rfind(" ", 0, lo) + 1
        ahead = line.find(" ", lo) + 1
        lo = back if lo - back < 12 or not 0 < ahead <= start else ahead
    hi = lo + width
    if hi < len(line) and line[hi] != " ":  # inside a word: end before it
        space = line.rfind(" ", lo, hi)
        hi = space if space > start + len(word) else hi
    return ("…" if lo else "") + line[lo:hi].strip() + ("…" if hi < len(line) else "")


def match_index(messages: Sequence[Any], words: Sequence[str]) -> int | None:
    """The message (its index) a search for `words` (case-folded) leads to: of those with the most
    of the words, the latest (the user's most recent mention); None when none has any."""
    best, best_count = None, 0
    for i, m in enumerate(messages):
        folded = m.content.casefold()
        n = sum(w in folded for w in words)
        if n and n >= best_count:
            best, best_count = i, n
    return best


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
                hits.append(Hit(conv, unseen[0] if unseen else "", tuple(words)))
        self._forget(convs)
        return hits

    def _forget(self, convs: list[Conversation]) -> None:
        """Drop entries of conversations that are gone (deleted) when the index has grown past them."""
        if len(self._entries) > 2 * len(convs) + 64:
            alive = {c.id for c in convs}
            self._entries = {k: v for k, v in self._entries.items() if k in alive}
