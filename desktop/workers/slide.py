"""The sliding window: which of a conversation's messages the model still sees when the whole
conversation no longer fits its context window (pure: token counts in, one index out).

The rule, stated once (it is deterministic from the conversation itself, so the same conversation
gives the same view after a restart, through the API or on another worker):

- The leading system message(s) always stay; the history is every message after them, and c(i)
  is the number of history tokens before message i (cumulative, from the conversation's start).
- need = system + history + reserve − window: how many history tokens must leave the view
  (reserve: the reply prompt plus what the reply may take). need ≤ 0: nothing leaves (0).
- Blocks of B = window // 4 tokens: the tokens dropped are need rounded UP to a multiple of B,
  D = ⌈need / B⌉·B, and the view starts at the first USER message i with c(i) ≥ D (so the turn
  structure stays valid: templates that alternate user/assistant see a user message first).
- The last user message is always visible: when no user message starts at or after D, the view
  starts there (it may still be too long for the window; the caller refuses that request).

So after a slide the view is about three quarters of the window (D overshoots need by less
than B), it then grows turn by turn with the same first message while ⌈need / B⌉ stays the same,
and slides again only once the history has grown by another B tokens: the KV is rebuilt at most
once per B tokens of growth, never on every turn."""

from __future__ import annotations

from typing import Sequence


def view_start(lengths: Sequence[int], roles: Sequence[str], reserve: int, window: int) -> int:
    """The index of the first message after the system prompt that the model still sees; 0 when it
    sees them all. `lengths[i]`: message i's tokens (template markers included); `roles[i]`: its
    role; `reserve`: tokens kept free after the messages (reply prompt + reply)."""
    if len(lengths) != len(roles):
        raise ValueError("one length per message")
    system = 0
    while system < len(roles) and roles[system] == "system":
        system += 1
    need = sum(lengths) + reserve - window
    if need <= 0 or system >= len(roles):
        return 0
    block = max(1, window // 4)
    drop = -(-need // block) * block
    users = [i for i in range(system, len(roles)) if roles[i] == "user"]
    last = users[-1] if users else len(roles) - 1
    before = 0  # history tokens before message i
    for i in range(system, last):
        if i > system and roles[i] == "user" and before >= drop:
            return i
        before += lengths[i]
    return last if last > system else 0
