"""System Prompt Cache: the K/V of a system prompt computed once, kept in RAM outside the slots,
and copied into a fresh slot. A few recent prompts are kept; a changed prompt is built anew
(a short one at once, a long one from the first request's own chunked prefill)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable

from transformers import DynamicCache

from desktop.model import kv


class SystemPromptCache:
    """Maps the token ids of a rendered system message to its K/V (on the CPU)."""

    def __init__(self, max_entries: int = 4) -> None:
        self.max_entries = max_entries
        self.entries: OrderedDict[tuple[int, ...], DynamicCache] = OrderedDict()
        self.builds = 0

    def has(self, ids: list[int]) -> bool:
        return tuple(ids) in self.entries

    def put(self, ids: list[int], cache: DynamicCache) -> None:
        """Keep `cache` (the K/V of exactly `ids`, not used by anyone else) as the entry for `ids`."""
        self.entries[tuple(ids)] = kv.to_device(cache, "cpu")
        self.entries.move_to_end(tuple(ids))
        self.builds += 1
        while len(self.entries) > self.max_entries:
            self.entries.popitem(last=False)

    def get(self, ids: list[int], build: Callable[[list[int]], DynamicCache], device) -> DynamicCache:
        """A fresh copy of the K/V of `ids` on `device`, building it once with `build` if needed."""
        key = tuple(ids)
        if key not in self.entries:
            self.put(ids, build(ids))
        self.entries.move_to_end(key)
        return kv.to_device(self.entries[key], device, copy=True)

    def nbytes(self) -> int:
        return sum(kv.nbytes(c) for c in self.entries.values())
