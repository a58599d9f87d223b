"""KVPool: preallocated K/V memory for a fixed number of rows (one conversation each).

Per layer one K and one V tensor of shape [rows, kv_heads, cap, head_dim] (one tensor per layer,
never views of one big buffer: a compiled or captured step writes them in place). A row's valid
length is kept by its owner (a plain int), so cropping a row is free: positions past the length
are stale and masked out by attention. `cap` grows in powers of two as conversations grow; the
last column is a scratch column that padded rows of a fixed-shape step may write into, so the
usable length of a row is cap - 1."""

from __future__ import annotations

from dataclasses import dataclass

import torch

MIN_CAP = 256


@dataclass(frozen=True, slots=True)
class SavedKV:
    """A copy of one row's first `n` positions in every layer, kept in host memory."""

    k: tuple[torch.Tensor, ...]
    v: tuple[torch.Tensor, ...]

    @property
    def n(self) -> int:
        return int(self.k[0].shape[1]) if self.k else 0

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.k + self.v)


def pow2_at_least(n: int, floor: int = 1) -> int:
    cap = floor
    while cap < n:
        cap *= 2
    return cap


class KVPool:
    def __init__(self, layers: int, rows: int, kv_heads: int, head_dim: int, dtype: torch.dtype,
                 device: torch.device | str, cap: int = MIN_CAP, max_len: int = 1 << 20) -> None:
        self.layers, self.rows, self.kv_heads, self.head_dim = layers, rows, kv_heads, head_dim
        self.dtype, self.device, self.max_len = dtype, torch.device(device), max_len
        self.generation = 0  # bumped whenever the tensors are replaced (captured graphs hold addresses)
        self.k: list[torch.Tensor] = []
        self.v: list[torch.Tensor] = []
        self._allocate(cap)

    @property
    def cap(self) -> int:
        return int(self.k[0].shape[2])

    @property
    def nbytes(self) -> int:
        return 2 * self.layers * self.rows * self.kv_heads * self.cap * self.head_dim * self.k[0].element_size()

    def _allocate(self, cap: int) -> None:
        shape = (self.rows, self.kv_heads, cap, self.head_dim)
        k = [torch.zeros(shape, dtype=self.dtype, device=self.device) for _ in range(self.layers)]
        v = [torch.zeros(shape, dtype=self.dtype, device=self.device) for _ in range(self.layers)]
        old = self.cap if self.k else 0
        for i in range(len(self.k)):  # keep what the rows hold (the new tensors exist before the old go)
            k[i][:, :, :old].copy_(self.k[i])
            v[i][:, :, :old].copy_(self.v[i])
        self.k, self.v = k, v
        self.generation += 1

    def reserve(self, n: int) -> None:
        """Make room for rows of n positions (plus the scratch column). Raises MemoryError-like
        errors from the allocator with the pool unchanged."""
        if n + 1 > self.max_len + 1:
            raise ValueError(f"{n} positions exceed the model's context ({self.max_len})")
        if n + 1 > self.cap:  # doubling, but never past the model's context (+ the scratch column)
            self._allocate(min(pow2_at_least(n + 1, self.cap), self.max_len + 1))

    # ------------------------------------------------------------------ row operations

    def copy(self, src: int, dst: int, n: int) -> None:
        """dst's first n positions := src's."""
        if src == dst or n <= 0:
            return
        for t in self.k + self.v:
            t[dst, :, :n].copy_(t[src, :, :n])

    def swap(self, a: int, b: int, n: int) -> None:
        """Exchange the first n positions of rows a and b."""
        if a == b or n <= 0:
            return
        for t in self.k + self.v:
            tmp = t[a, :, :n].clone()
            t[a, :, :n].copy_(t[b, :, :n])
            t[b, :, :n].copy_(tmp)

    def export(self, row: int, n: int) -> SavedKV:
        cpu = torch.device("cpu")
        return SavedKV(tuple(t[row, :, :n].to(cpu, copy=True) for t in self.k),
                       tuple(t[row, :, :n].to(cpu, copy=True) for t in self.v))

    def load(self, saved: SavedKV, row: int) -> int:
        """row's first saved.n positions := saved's; returns n."""
        n = saved.n
        self.reserve(n)
        for dst, src in zip(self.k + self.v, saved.k + saved.v):
            dst[row, :, :n].copy_(src)
        return n
