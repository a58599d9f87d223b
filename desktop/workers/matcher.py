"""Incremental Message Cache: decide which slot serves a stateless request and how much of its
KV to keep. Order: chained message-prefix hash (a slot in RAM, or a snapshot on disk when it
holds more of the conversation) → longest token prefix ≥ cache_min_tokens → empty slot (seeded
from the system prompt cache) → LRU eviction → busy.

A snapshot on disk (kv_disk) is read back into a free slot: the plan carries the runner export
(`restore`), admission queues it as the slot's KV, and the turn reports MatchKind.DISK with the
restored tokens as cached.

With images the token-prefix step is skipped (for the request, and for slots that hold images):
an image's positions are not a provable boundary by ids alone. The hash covers image bytes, and
ids of two different images always differ (model/images.py), so the hash step's reuse stops
at the first image that differs: a new image in the history rebuilds from there."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from desktop.protocol import CacheReason, MatchKind
from desktop.model.chat_template import ChatTemplate, Encoded
from desktop.model.messages import Message, history_hash, prefix_hashes
from desktop.workers.config import CacheMode
from desktop.workers.tokenizer_stage import encode_raw
from desktop.workers.slots import Slot, SlotTable, common_prefix


@dataclass(slots=True)
class Plan:
    """Where a request runs: keep slot.ids[:reuse] (or the SPC ids), prefill prompt[reuse:]."""

    slot: Slot
    kind: MatchKind
    reuse: int
    prompt: list[int]  # canonical ids of the messages + generation prompt
    canon: list[int]
    bounds: list[int] | None
    spc_ids: list[int] | None = None
    miss_reason: str = ""  # a CacheReason value: why the history is not all reused ("" if it is)
    source: Slot | None = None  # branch: copy the first `reuse` positions of source's KV into `slot` instead of cropping in place
    restore: Any = None  # a runner export of `reuse` positions read from disk: the (empty) slot's KV


class Matcher:
    def __init__(self, table: SlotTable, template: ChatTemplate, mode: CacheMode, min_tokens: int,
                 disk: Any = None) -> None:
        """`disk`: the worker's kv_disk.store.DiskStore (None: no disk tier)."""
        self.table, self.template, self.mode, self.min_tokens = table, template, mode, min_tokens
        self.disk = disk

    @staticmethod
    def history(msgs: Sequence[Message], bounds: list[int] | None, cached: int) -> int:
        """Tokens of the messages before the last one (what the cache could hold); where message
        bounds are unprovable, what was reused."""
        if len(msgs) < 2:
            return 0
        return bounds[-2] if bounds else cached

    def plan(self, msgs: Sequence[Message], enc: Encoded | None = None, raw: bool = False,
             warm: bool = False) -> Plan:
        """`enc`: the messages' canonical ids where already made (the tokenizer stage's); `raw`:
        a raw prompt (Chat.raw: its text's own ids, no generation prompt, found by token prefix);
        a `warm` restores from disk only into an empty slot (it never evicts)."""
        gen = [] if raw else self.template.gen_prompt_ids
        if enc is None:
            enc = encode_raw(self.template, tuple(msgs)) if raw else self.template.encode(msgs)
        if self.mode.imc:
            plan = self._by_disk(msgs, enc, gen, warm) or self._by_hash(msgs, enc, gen)
            if plan is not None:
                return plan
        prompt = enc.ids + gen
        if self.mode.imc and not any(m.images for m in msgs):
            found = self.table.find_by_prefix(prompt, self.min_tokens)
            if found is not None:
                slot, n = found
                plan = Plan(slot, MatchKind.PREFIX, min(n, len(prompt) - 1), prompt, enc.ids, enc.bounds,
                            miss_reason=self._diverged(msgs, 0))
                return self._branch(plan)
        reason = self._miss_reason(msgs)
        slot = self.table.take_free()
        spc = self._spc_ids(msgs, enc.ids, enc.bounds)
        if spc is not None and len(spc) < len(prompt):
            return Plan(slot, MatchKind.SPC, len(spc), prompt, enc.ids, enc.bounds, spc_ids=spc, miss_reason=reason)
        return Plan(slot, MatchKind.MISS, 0, prompt, enc.ids, enc.bounds, miss_reason=reason)

    def _by_hash(self, msgs: Sequence[Message], enc: Encoded, gen: list[int]) -> Plan | None:
        if enc.bounds is None:  # template not append-only: boundaries unprovable, rebuild by tokens
            return None
        found = self.table.find_by_hash(prefix_hashes(msgs))
        if found is None:
            return None
        slot, k = found
        plan, replaces_reply = self._reuse(slot, slot, k, msgs, enc, gen)
        return self._branch(plan) if k < len(slot.hashes) and not replaces_reply else plan

    def _reuse(self, slot: Slot, held: Any, k: int, msgs: Sequence[Message], enc: Encoded,
               gen: list[int]) -> tuple[Plan, bool]:
        """The plan in `slot` for a request whose first k messages `held` holds (a slot, or a
        snapshot's state: ids, msgs, hashes, canon, bounds), and whether it replaces held's last message."""
        # the messages after the k cached ones: their chunks, as encode_delta(msgs[:k], msgs[k:]) gives them
        base, cut = held.bounds[k - 1], enc.bounds[k - 1]
        canon = list(held.canon[:base]) + enc.ids[cut:]
        bounds = list(held.bounds[:k]) + [base + b - cut for b in enc.bounds[k:]]
        prompt = canon + gen
        reuse = min(common_prefix(held.ids, prompt), len(prompt) - 1)
        # a new version of the slot's last message: its reply (regenerate, or the client's own text
        # of it), or a user message nothing answered (a draft warmed while typing, a stopped turn)
        replaces_reply = k == len(held.hashes) - 1 and held.msgs[-1].role in ("assistant", "user")
        if reuse >= len(canon):
            kind, reason = MatchKind.HIT, self._kept(held, k, len(msgs), replaces_reply)
        elif k == len(held.hashes) or replaces_reply:  # the slot's conversation is this one's prefix
            kind, reason = MatchKind.EXTEND, self._kept(held, k, len(msgs), replaces_reply)
        else:
            kind, reason = MatchKind.PREFIX, self._diverged(msgs, k)
        return Plan(slot, kind, reuse, prompt, canon, bounds, miss_reason=reason), replaces_reply

    def _by_disk(self, msgs: Sequence[Message], enc: Encoded, gen: list[int], warm: bool) -> Plan | None:
        """A snapshot on disk that holds more of the conversation than any slot in RAM, read back
        into a free slot; None when there is none (or it could not be read: it is gone then)."""
        if self.disk is None or enc.bounds is None:
            return None
        hashes = prefix_hashes(msgs)
        found = self.disk.find(hashes)
        if found is None:
            return None
        snap, k = found
        ram = self.table.find_by_hash(hashes)
        if ram is not None and ram[1] >= k:  # RAM holds as much: no disk read
            return None
        plan, _ = self._reuse(self.table.slots[0], snap.state, k, msgs, enc, gen)
        free = self.table.empty_slot() is not None or (not warm and any(s.evictable for s in self.table.slots))
        if plan.reuse < 1 or not free:
            return None
        saved = self.disk.restore(snap, plan.reuse)
        if saved is None:
            return None
        plan.slot, plan.kind, plan.restore = self.table.take_free(), MatchKind.DISK, saved
        plan.miss_reason = plan.miss_reason or CacheReason.RESTORED.value
        return plan

    def _branch(self, plan: Plan) -> Plan:
        """A request that diverges from a slot's conversation before its last reply (an edit, or
        another conversation with the same system prompt) keeps that conversation intact when an
        empty slot can take the shared prefix as a copy; otherwise the slot is cropped in place.
        A new version of the last reply (regenerate) simply replaces it."""
        empty = self.table.empty_slot()
        if empty is not None:
            plan.source, plan.slot = plan.slot, empty
        return plan

    def _spc_ids(self, msgs: Sequence[Message], canon: list[int], bounds: list[int] | None) -> list[int] | None:
        if not self.mode.spc or not bounds or msgs[0].role != "system":
            return None
        return canon[: bounds[0]]

    @staticmethod
    def _kept(slot: Any, k: int, n: int, replaces_reply: bool) -> str:
        """Why a request that extends the slot's conversation (k of its n messages) does not
        reuse all of its history, or "" when it does (only the last reply's closing tokens, or
        a reply text that tokenises differently, are read again)."""
        if len(slot.ids) < (slot.bounds[k - 2] if k >= 2 else 0):  # a stopped turn left it short
            return CacheReason.REBUILT.value
        if k < n - 1 and not replaces_reply:  # messages in between that the model never read
            return CacheReason.UNSEEN_MESSAGES.value
        return ""

    def _diverged(self, msgs: Sequence[Message], k: int) -> str:
        """Why only a shared prefix of another cached branch is reused, told truly: `k` messages
        match by hash (0: a token prefix only)."""
        if _is_new(msgs):  # its first user message: it only starts like a cached conversation
            return CacheReason.NEW.value
        if k == len(msgs) - 1:  # its whole history is cached; the branch went on with another message
            return CacheReason.EDITED.value
        return self._miss_reason(msgs)  # why its own branch is not here: evicted, or never seen

    def _miss_reason(self, msgs: Sequence[Message]) -> str:
        if _is_new(msgs):
            return CacheReason.NEW.value
        if not self.mode.imc:
            return (CacheReason.CACHE_OFF if self.mode is CacheMode.OFF else CacheReason.MESSAGE_CACHE_OFF).value
        if history_hash(msgs) in self.table.evicted:  # evicted, or cropped away by another branch
            return CacheReason.EVICTED.value
        return CacheReason.NOT_SEEN.value  # e.g. the model was reloaded, or the app restarted


def _is_new(msgs: Sequence[Message]) -> bool:
    """A request with one message after the optional system prompt: a conversation's first turn."""
    return len(msgs) == 1 or (len(msgs) == 2 and msgs[0].role == "system")
