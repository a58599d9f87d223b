"""M-RoPE positions (Qwen2-VL style) for a slot's KV, in plain ints (no torch).

An M-RoPE model gives every position three rotary indices (t, h, w). Text positions have all
three equal and count up by one; an image of t×h×w merged patches takes t·h·w KV positions whose
indices are (p + ti, p + hi, p + wi) from the counter p where it starts, and the counter then
moves on by max(h, w) only (as the model's own `get_rope_index` does). So after an image, a
text position's index is its KV index plus the "rope delta" (advance − length) of every image
before it. `RopeTrack` keeps, per slot, where its images lie and what each advances, so a chunk
prefilled (or a token decoded) at any KV index gets the indices a whole-prompt forward would."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence


@dataclass(frozen=True, slots=True)
class Grid:
    """An image's grid in the language model's positions (merged patches): t × h × w."""

    t: int
    h: int
    w: int

    @property
    def length(self) -> int:
        """KV positions the image takes."""
        return self.t * self.h * self.w

    @property
    def advance(self) -> int:
        """How far the position counter moves over the image (Qwen2-VL: max(h, w))."""
        return max(self.h, self.w)


@dataclass(frozen=True, slots=True)
class Placed:
    """An image in a slot's KV: positions [start, start + length), counter moved by `advance`."""

    start: int
    length: int
    advance: int

    @property
    def end(self) -> int:
        return self.start + self.length

    @property
    def delta(self) -> int:
        return self.advance - self.length


def image_indices(at: int, grid: Grid) -> tuple[list[int], list[int], list[int]]:
    """The (t, h, w) indices of an image's positions (t-major, then rows, then columns) when the
    counter stands at `at`."""
    rows: tuple[list[int], list[int], list[int]] = ([], [], [])
    for ti in range(grid.t):
        for hi in range(grid.h):
            for wi in range(grid.w):
                rows[0].append(at + ti)
                rows[1].append(at + hi)
                rows[2].append(at + wi)
    return rows


@dataclass(slots=True)
class RopeTrack:
    """One slot's images as M-RoPE sees them: the KV length is the truth (spans at or past the
    KV's end are stale and dropped when the slot grows again)."""

    spans: list[Placed] = field(default_factory=list)

    def delta(self, n: int | None = None) -> int:
        """The rope delta of KV index `n` (default: past every image): index = n + delta."""
        return sum(s.delta for s in self.spans if n is None or s.end <= n)

    def crop(self, n: int) -> None:
        """Keep the images wholly within the first n positions."""
        self.spans = [s for s in self.spans if s.end <= n]

    def prefix(self, n: int) -> "RopeTrack":
        return RopeTrack([s for s in self.spans if s.end <= n])

    def positions(self, start: int, ids: Sequence[int], grid_of: Callable[[int], Grid]) -> list[list[int]]:
        """The three rows of rotary indices for `ids` placed at KV index `start` (image runs as
        negative keys, each whole; `grid_of(key)` gives its grid); records the images."""
        self.crop(start)
        at = start + self.delta(start)
        rows: list[list[int]] = [[], [], []]
        i = 0
        while i < len(ids):
            if ids[i] >= 0:
                for row in rows:
                    row.append(at)
                at += 1
                i += 1
                continue
            key, grid = ids[i], grid_of(ids[i])
            if list(ids[i : i + grid.length]) != [key] * grid.length:
                raise RuntimeError(f"An image's run at {start + i} is not {grid.length} positions long")
            for row, part in zip(rows, image_indices(at, grid)):
                row.extend(part)
            self.spans.append(Placed(start + i, grid.length, grid.advance))
            at += grid.advance
            i += grid.length
        return rows
