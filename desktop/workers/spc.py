"""System Prompt Cache policy: the K/V of a few recent system prompts, kept outside the slots and
copied into a fresh slot. Torch-free: it holds the runner's opaque exports (`Runner.export_prefix`)
and their sizes; a changed prompt is built anew (a short one at once, a long one from the first
request's own chunked prefill)."""

from __future__ import annotations

from typing import Any, Sequence

from desktop.bounded import BoundedDict


class SystemPromptCache:
    """Maps the token ids of a rendered system message to the saved K/V of exactly those ids."""

    def __init__(self, max_entries: int = 4) -> None:
        self.entries: BoundedDict[tuple[int, ...], tuple[Any, int]] = BoundedDict(max_entries, lru=True)
        self.builds = 0

    def has(self, ids: Sequence[int]) -> bool:
        return tuple(ids) in self.entries

    def put(self, ids: Sequence[int], saved: Any, nbytes: int = 0) -> None:
        """Keep `saved` (an export of exactly `ids`, used by no one else) as the entry for `ids`;
        the least recently used entry goes beyond `max_entries`."""
        key = tuple(ids)
        self.entries[key] = (saved, nbytes)
        self.builds += 1

    def get(self, ids: Sequence[int]) -> Any:
        """The saved K/V of `ids` (KeyError if absent); it becomes the most recently used."""
        return self.entries[tuple(ids)][0]

    def nbytes(self) -> int:
        return sum(n for _, n in self.entries.values())
