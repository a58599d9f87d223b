"""KV slots of one worker: which conversation branch each holds, which one goes when room is needed
(`keep_worth`: length, who asked, how long idle) and the KV memory budget. Token ids and hashes
only — no torch — so the policy is tested in milliseconds."""

from __future__ import annotations

import bisect
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from desktop.bounded import BoundedDict
from desktop.protocol import SlotInfo, SlotState
from desktop.errors import BusyError, ContextOverflow
from desktop.model.images import Span, has_media, image_spans
from desktop.model.kv_shape import PerToken
from desktop.model.messages import Message, prefix_hashes

Footprint = Callable[[Sequence[int]], int]  # slot lengths → bytes the runner's KV takes for them
ORIGIN_WEIGHT = {"app": 4.0, "api": 1.0}  # a conversation of the window or a call, an HTTP API client's
HALF_LIFE_S = 600.0  # every ten minutes idle halves what keeping a conversation is worth


def keep_worth(tokens: int, origin: str, idle_s: float) -> float:
    """What keeping an idle conversation's KV is worth; the least worth goes first when a slot
    or memory is needed.

    worth = tokens × weight(origin) × 0.5 ** (idle_s / HALF_LIFE_S)

    - tokens: what a re-prefill would cost if it came back (its length);
    - weight: who asked: 4 for the app (a conversation open in the window, a call), 1 for the
      HTTP API (and anything unknown), so a short API exchange goes before the user's long chat;
    - idle: halves every HALF_LIFE_S, so a conversation left for hours goes before a fresh one
      of a similar size, whoever asked.
    Among equals the least recently used goes first (the caller breaks ties by last use)."""
    weight = ORIGIN_WEIGHT.get(origin, 1.0)
    return tokens * weight * 0.5 ** (max(idle_s, 0.0) / HALF_LIFE_S)


@dataclass(slots=True, eq=False)
class Slot:
    """One conversation branch: the ids whose K/V it holds and the messages they came from.

    `ids` are exactly the tokens in the runner's KV of slot `index` while the slot is idle. `canon`/`bounds` are the canonical
    ids of `msgs` and the id count after each message; `hashes[k]` is the chain hash of msgs[:k+1].
    A reply the slot generated is its last message, its text as decoded, and its canonical ids are
    the ids generated where they spell that text (ChatTemplate.encode_reply): the hash match reads
    the reply as the KV holds it, even once the chunk memo has forgotten it."""

    index: int
    ids: list[int] = field(default_factory=list)
    msgs: tuple[Message, ...] = ()
    hashes: list[bytes] = field(default_factory=list)
    canon: list[int] = field(default_factory=list)
    bounds: list[int] = field(default_factory=list)
    last_used: float = 0.0
    request_id: str | None = None  # set while a request builds or runs in this slot (pending/active)
    session_id: str | None = None  # set while a stateful session owns this slot
    reserved: int = 0  # tokens the running request may grow to (for the budget)
    origin: str = "app"  # who last asked for this conversation: "app" (window, call) or "api"
    conversation: str = ""  # the saved conversation it holds ("" for none): names its snapshot on disk

    @property
    def state(self) -> SlotState:
        if self.request_id is not None:
            return SlotState.BUSY
        if self.session_id is not None:
            return SlotState.SESSION
        return SlotState.IDLE if self.ids else SlotState.EMPTY

    @property
    def images(self) -> list[Span]:
        """Where each image's KV lies in the slot: its key, first position and how many positions
        it takes (text after it sits at start + length onwards)."""
        return image_spans(self.ids)

    @property
    def evictable(self) -> bool:
        return self.request_id is None and self.session_id is None

    @property
    def tokens(self) -> int:
        return max(len(self.ids), self.reserved)

    def clear(self) -> None:
        self.ids, self.msgs, self.hashes, self.canon, self.bounds = [], (), [], [], []
        self.reserved, self.conversation = 0, ""

    def set_conversation(self, msgs: Sequence[Message], canon: list[int], bounds: list[int] | None) -> None:
        """Record which messages the slot's ids come from (bounds None: not provable → no hashes)."""
        if bounds is None:
            self.msgs, self.hashes, self.canon, self.bounds = (), [], [], []
            return
        self.msgs, self.hashes, self.canon, self.bounds = tuple(msgs), prefix_hashes(msgs), canon, bounds

    def info(self, bytes_per_token: int) -> SlotInfo:
        return SlotInfo(
            index=self.index,
            state=self.state,
            hashes=tuple(self.hashes),
            tokens=len(self.ids),
            last_used=self.last_used,
            session_id=self.session_id,
            kv_bytes=len(self.ids) * bytes_per_token,
        )


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading ids `a` and `b` share."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class SlotTable:
    """N slots plus the rules to find, free and budget them. Every eviction goes through `evict`
    (and so `on_evict`), the victim chosen by `victim` (keep_worth)."""

    def __init__(self, num_slots: int, bytes_per_token: int, budget_bytes: int, clock: Callable[[], float] = time.monotonic,
                 on_evict: Callable[[Slot], None] = lambda slot: None, footprint: Footprint | None = None):
        """`on_evict(slot)` is told of every eviction, before the slot forgets what it held (the
        scheduler saves it to disk, then drops that slot's KV).
        `footprint(lengths)`: what the runner's KV takes for slots of these lengths (its layout:
        kv_shape.PerToken, or PaddedRows for a pool whose rows are all as long as the longest);
        the budget bounds that, not just the sum of the lengths."""
        self.on_evict = on_evict
        self.slots = [Slot(i) for i in range(num_slots)]
        self.bytes_per_token = max(bytes_per_token, 1)
        self.footprint = footprint or PerToken(self.bytes_per_token)
        self.budget_bytes = budget_bytes
        self.clock = clock
        self.evicted: BoundedDict[bytes, None] = BoundedDict(4096)  # hashes of evicted branches (miss reasons)

    def find_by_hash(self, hashes: Sequence[bytes]) -> tuple[Slot, int] | None:
        """The evictable slot holding the longest message prefix of the request (k ≥ 1 messages)."""
        best: tuple[Slot, int] | None = None
        for slot in self.slots:
            if not slot.evictable or not slot.hashes:
                continue
            k = min(len(slot.hashes), len(hashes))
            while k > 0 and slot.hashes[k - 1] != hashes[k - 1]:
                k -= 1
            if k and (best is None or (k, slot.last_used) > (best[1], best[0].last_used)):
                best = (slot, k)
        return best

    def find_by_prefix(self, ids: Sequence[int], min_tokens: int) -> tuple[Slot, int] | None:
        """The evictable slot sharing the longest token prefix with `ids`, if at least min_tokens."""
        best: tuple[Slot, int] | None = None
        for slot in self.slots:
            if slot.evictable and slot.ids and not has_media(slot.ids):
                n = common_prefix(slot.ids, ids)
                if n >= min_tokens and (best is None or n > best[1]):
                    best = (slot, n)
        return best

    def empty_slot(self) -> Slot | None:
        return next((s for s in self.slots if s.evictable and not s.ids), None)

    def take_free(self) -> Slot:
        """An empty slot, else the evictable one least worth keeping (evicted); else BusyError."""
        empty = self.empty_slot()
        if empty is not None:
            return empty
        idle = [s for s in self.slots if s.evictable]
        if not idle:
            raise BusyError("All conversation slots of this worker are in use; try again in a moment.")
        victim = self.victim(idle)
        self.evict(victim)
        return victim

    def victim(self, candidates: Sequence[Slot]) -> Slot:
        """The candidate least worth keeping (keep_worth), the least recently used among equals."""
        now = self.clock()
        return min(candidates, key=lambda s: (keep_worth(len(s.ids), s.origin, now - s.last_used), s.last_used))

    def evict(self, slot: Slot) -> None:
        self._gone(slot.hashes)
        self.on_evict(slot)
        slot.clear()

    def retire(self, slot: Slot, keep: int) -> None:
        """The slot keeps only its first `keep` ids for another branch: the messages past them
        leave the cache as an eviction does (their turns' reason says so)."""
        self._gone(slot.hashes[bisect.bisect_right(slot.bounds, keep):])

    def _gone(self, hashes: Sequence[bytes]) -> None:
        self.evicted.update(dict.fromkeys(hashes))

    def used_bytes(self) -> int:
        """KV bytes the runner allocates for what the slots hold and have reserved."""
        return self.footprint([s.tokens for s in self.slots])

    def reserve(self, slot: Slot, tokens: int, keep: Slot | None = None) -> None:
        """Reserve room for `slot` to grow to `tokens`, evicting idle slots (least worth keeping
        first, never `keep`) to fit."""
        need = self.footprint([tokens])
        if need > self.budget_bytes:
            raise ContextOverflow(
                f"This conversation needs {need / 2**20:.0f} MiB of KV memory, more than the worker's "
                f"budget of {self.budget_bytes / 2**20:.0f} MiB. Raise the budget or shorten the conversation."
            )
        slot.reserved = tokens
        idle = [s for s in self.slots if s.evictable and s.ids and s is not slot and s is not keep]
        if self.footprint([s.tokens for s in self.slots if all(s is not i for i in idle)]) > self.budget_bytes:
            slot.reserved = 0  # even with every idle slot gone it would not fit: evict nothing
            raise BusyError("The KV memory budget is taken by running conversations; try again shortly.")
        while self.used_bytes() > self.budget_bytes:
            self.evict(self.victim([s for s in idle if s.ids]))

    def infos(self) -> tuple[SlotInfo, ...]:
        return tuple(s.info(self.bytes_per_token) for s in self.slots)

    def check_integrity(self, kv_len: Callable[[int], int], active: set[str]) -> None:
        """Raise AssertionError if any slot's bookkeeping is inconsistent (tests call this often).

        `kv_len(index)` gives the length of that slot's KV, or -1 when its layers disagree: an idle
        slot's ids and its KV must always agree, in every layer."""
        for s in self.slots:
            if s.request_id is not None:
                assert s.request_id in active, f"slot {s.index} pending for finished request {s.request_id}"
                continue
            assert s.reserved == 0, f"slot {s.index} keeps a reservation with no request"
            n = kv_len(s.index)
            assert n == len(s.ids), f"slot {s.index}: kv {n} (-1: layers disagree) != ids {len(s.ids)}"
            assert s.hashes == prefix_hashes(s.msgs), f"slot {s.index}: hashes do not match its messages"
            assert len(s.bounds) == len(s.msgs), f"slot {s.index}: bounds do not match its messages"
            assert not s.bounds or s.bounds[-1] == len(s.canon), f"slot {s.index}: canon length"
            sizes: dict[int, int] = {}
            for span in s.images:  # every image whole, and the same size wherever it appears
                assert span.end < len(s.ids), f"slot {s.index}: its ids end inside an image"
                assert sizes.setdefault(span.key, span.length) == span.length, f"slot {s.index}: an image cut short"
        assert self.used_bytes() <= self.budget_bytes, "KV memory budget exceeded"
