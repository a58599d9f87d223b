"""System Prompt Cache: the K/V of a system prompt computed once, kept in RAM outside the slots,
and copied into a fresh slot. A few recent prompts are kept; a changed prompt is built anew."""

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

    def get(self, ids: list[int], build: Callable[[list[int]], DynamicCache], device) -> DynamicCache:
        """A fresh copy of the K/V of `ids` on `device`, building it once with `build` if needed."""
        key = tuple(ids)
        if key not in self.entries:
            self.entries[key] = kv.to_device(build(ids), "cpu")
            self.builds += 1
            while len(self.entries) > self.max_entries:
                self.entries.popitem(last=False)
        self.entries.move_to_end(key)
        return kv.to_device(self.entries[key], device, copy=True)

    def nbytes(self) -> int:
        return sum(kv.nbytes(c) for c in self.entries.values())
