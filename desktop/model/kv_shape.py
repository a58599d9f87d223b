"""The shape rules of the KV memory, without torch: how long a pool row must be for n positions
and what a set of slots costs under each runner's layout (the scheduler budgets with these)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

MIN_CAP = 256  # a pool row's shortest length (positions, scratch column included)


def pow2_at_least(n: int, floor: int = 1) -> int:
    cap = floor
    while cap < n:
        cap *= 2
    return cap


def pool_cap(n: int, max_len: int) -> int:
    """Columns a pool row needs to hold n positions: n plus the scratch column, rounded up to a
    power of two (at least MIN_CAP), never past the model's context plus the scratch column."""
    return min(pow2_at_least(n + 1, MIN_CAP), max_len + 1)


@dataclass(frozen=True, slots=True)
class PerToken:
    """KV that grows token by token per slot (transformers' DynamicCache): the sum of the lengths."""

    bytes_per_token: int

    def __call__(self, lengths: Sequence[int]) -> int:
        return sum(lengths) * self.bytes_per_token


@dataclass(frozen=True, slots=True)
class PaddedRows:
    """The static runner's pool: one row per slot that holds KV, every row as long as the
    longest one needs (pool_cap). What a pool shaped for `lengths` allocates, in bytes."""

    bytes_per_token: int
    max_len: int

    def rows_bytes(self, rows: int, longest: int) -> int:
        return rows * pool_cap(longest, self.max_len) * self.bytes_per_token if rows else 0

    def __call__(self, lengths: Sequence[int]) -> int:
        used = [n for n in lengths if n > 0]
        return self.rows_bytes(len(used), max(used, default=0))
