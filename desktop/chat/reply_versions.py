"""The kept versions of a regenerated reply (no Qt). A reply's own `content`/`stats` are the version
shown, the one the conversation continues from; `StoredMessage.versions` holds the others in their
order, and `StoredMessage.shown` is where the shown one sits among all of them (0-based)."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from desktop.chat.saved_fields import clean_text, reply_stats, timestamp

if TYPE_CHECKING:
    from desktop.chat.conversations import StoredMessage

MAX_VERSIONS = 10  # of one reply, the shown one included; the oldest go first


@dataclass(slots=True)
class ReplyVersion:
    """A version of a reply that is not shown: its text and its own stats."""

    content: str
    stats: dict[str, Any] | None = None
    created: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def parse(cls, data: Any, fallback_time: float) -> ReplyVersion | None:
        """A saved version, or None when it is not one (it is dropped, the reply stays)."""
        if not isinstance(data, dict) or not isinstance(data.get("content"), str):
            return None
        return cls(clean_text(data["content"]), reply_stats(data.get("stats")),
                   timestamp(data.get("created")) or fallback_time)


def count(msg: StoredMessage) -> int:
    """How many versions the reply has (1 when it was never regenerated)."""
    return len(msg.versions) + 1


def succeed(new: StoredMessage, previous: StoredMessage) -> None:
    """`new` is written to replace `previous` (Regenerate): it keeps every version of `previous`,
    `previous` itself where it was shown, and comes last, shown; at most MAX_VERSIONS in all."""
    kept = [ReplyVersion(v.content, dict(v.stats) if v.stats else None, v.created) for v in previous.versions]
    at = min(max(previous.shown, 0), len(kept))
    kept.insert(at, ReplyVersion(previous.content, dict(previous.stats) if previous.stats else None, previous.created))
    new.versions = kept[max(len(kept) - (MAX_VERSIONS - 1), 0):]
    new.shown = len(new.versions)


def switch(msg: StoredMessage, to: int) -> bool:
    """Show version `to` (0-based, of `count(msg)`) in `msg`'s own fields, the one shown until now
    going back to its place among the others; False (nothing changes) when `to` is out of range
    or already shown."""
    at = min(max(msg.shown, 0), len(msg.versions))
    if not 0 <= to < count(msg) or to == at:
        return False
    current = ReplyVersion(msg.content, msg.stats, msg.created)
    everyone = msg.versions[:at] + [current] + msg.versions[at:]
    chosen = everyone.pop(to)
    msg.content, msg.stats, msg.created = chosen.content, chosen.stats, chosen.created
    msg.versions, msg.shown = everyone, to
    return True
