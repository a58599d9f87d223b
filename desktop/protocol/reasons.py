"""Why a turn did or did not take its history from the KV cache: the one vocabulary that the
worker reports and the badge, Admin, the terminal chat's /stats and /metrics all show.

Each reason's value is the few plain words shown on the badge's line (and stored with a
message); `sentence` says it in one plain sentence (the badge's tooltip). Words stored by older
versions are read back as the reason they meant (`reason_of`)."""

from __future__ import annotations

from enum import Enum


class CacheReason(str, Enum):
    CACHED = "history cached"
    NEW = "new conversation"
    EDITED = "edited"
    UNSEEN_MESSAGES = "new messages in the history"
    EVICTED = "evicted"
    NOT_SEEN = "not cached since the model loaded"
    REBUILT = "rebuilt after an interrupted turn"
    MOVED = "moved from another worker"
    CACHE_OFF = "cache off"
    MESSAGE_CACHE_OFF = "message cache off"
    REMOTE_MISS = "the server reused nothing"
    RESTORED = "restored from disk"
    SLID = "past the window: oldest messages left out"

    @property
    def sentence(self) -> str:
        return SENTENCES[self]


SENTENCES: dict[CacheReason, str] = {
    CacheReason.CACHED: "Everything before your message came from the cache; only the new message was read.",
    CacheReason.NEW: "A new conversation: there was no earlier history to reuse (a cached system prompt still is).",
    CacheReason.EDITED: "You edited a message: the conversation before it came from the cache.",
    CacheReason.UNSEEN_MESSAGES: "The history has messages the model had not read yet (added since its last "
                                 "reply); they were read now, the rest came from the cache.",
    CacheReason.EVICTED: "This conversation's cache had been dropped to make room for other conversations, "
                         "so what was missing was read again.",
    CacheReason.NOT_SEEN: "This conversation was not cached since the model was loaded (a restart or a new "
                          "model), so it was read again.",
    CacheReason.REBUILT: "An earlier turn was interrupted, so the conversation was read again.",
    CacheReason.MOVED: "The worker that held this conversation's cache went away; another worker read it again.",
    CacheReason.CACHE_OFF: "The cache is off in Settings: every turn reads the whole conversation.",
    CacheReason.MESSAGE_CACHE_OFF: "Only the system prompt is cached (the message cache is off in Settings), "
                                   "so every turn reads the conversation again.",
    CacheReason.REMOTE_MISS: "The remote server reused nothing from its own cache.",
    CacheReason.RESTORED: "This conversation's cache had left memory and was restored from disk; only the new "
                          "message was read.",
    CacheReason.SLID: "The conversation is longer than the model's window: its oldest messages left the model's "
                      "view, so what it still sees was read again after the system prompt (once per quarter window).",
}

_MOVED = "moved from "
LEGACY = {  # words older versions stored, and what they meant
    "new conversation, same system prompt": CacheReason.NEW,
    "new conversation, same start": CacheReason.NEW,
    "history partly cached": CacheReason.EVICTED,
    "not cached since this worker loaded": CacheReason.NOT_SEEN,
    "not cached": CacheReason.NOT_SEEN,
}


def moved(worker: str, why: str) -> str:
    """The stored words of a MOVED turn, naming the worker that held it and why it went."""
    return f"{_MOVED}{worker} ({why})"


def reason_of(words: str | None, kind: str = "") -> CacheReason | None:
    """The reason stored words stand for (None: none given; a cache hit of an older version
    stored no words: CACHED)."""
    if words:
        if words.startswith(_MOVED):
            return CacheReason.MOVED
        try:
            return CacheReason(words)
        except ValueError:
            return LEGACY.get(words)
    if kind == "disk":
        return CacheReason.RESTORED
    return CacheReason.CACHED if kind in ("hit", "extend") else None


def sentence_of(words: str | None, kind: str = "") -> str:
    """The plain sentence for stored words; words from elsewhere (a remote server) as they are."""
    reason = reason_of(words, kind)
    if reason is None:
        return words or ""
    if reason is CacheReason.MOVED and words and words.startswith(_MOVED) and words != reason.value:
        where = words[len(_MOVED):]
        return f"The worker that held this conversation's cache ({where}) went away; another worker read it again."
    return reason.sentence


def label_of(words: str | None, kind: str = "") -> str:
    """The few words for the badge's line: the reason's own, MOVED with its worker."""
    reason = reason_of(words, kind)
    if reason is None:
        return words or ""
    return words if reason is CacheReason.MOVED and words else reason.value
