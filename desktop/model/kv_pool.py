"""KVPool: preallocated K/V memory for a number of rows (one conversation each).

Per layer one K and one V tensor of shape [rows, kv_heads, cap, head_dim] (one tensor per layer,
never views of one big buffer: a compiled or captured step writes them in place). A row's valid
length is kept by its owner (a plain int), so cropping a row is free: positions past the length
are stale and masked out by attention. The owner picks the shape (`reshape`: rows and cap, in
powers of two as conversations grow, see kv_shape.pool_cap) and so keeps it within its memory
budget; the last column is a scratch column that padded rows of a fixed-shape step may write
into, so the usable length of a row is cap - 1. On the CPU the tensors are zeros the OS hands out
page by page on first touch (`lazy_zeros`): a pool grown for a long conversation costs the
positions written, not its whole shape (a 4k restore shaped 755 MB of zeros and wrote 171 MB)."""

from __future__ import annotations

import math
import mmap
from dataclasses import dataclass

import torch

from desktop.model.kv_shape import MIN_CAP, pow2_at_least  # noqa: F401  (re-exported)


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


class KVPool:
    def __init__(self, layers: int, rows: int, kv_heads: int, head_dim: int, dtype: torch.dtype,
                 device: torch.device | str, cap: int = MIN_CAP, max_len: int = 1 << 20) -> None:
        self.layers, self.rows, self.kv_heads, self.head_dim = layers, rows, kv_heads, head_dim
        self.dtype, self.device, self.max_len = dtype, torch.device(device), max_len
        self.generation = 0  # bumped whenever the tensors are replaced (captured graphs hold addresses)
        self.k: list[torch.Tensor] = []
        self.v: list[torch.Tensor] = []
        self.reshape(rows, cap, [])

    @property
    def cap(self) -> int:
        return int(self.k[0].shape[2])

    @property
    def bytes_per_position(self) -> int:
        """What one position of one row costs in every layer, K and V."""
        return 2 * self.layers * self.kv_heads * self.head_dim * torch.empty((), dtype=self.dtype).element_size()

    @property
    def nbytes(self) -> int:
        """Bytes the pool's tensors really hold (counted from the tensors)."""
        return sum(t.numel() * t.element_size() for t in self.k + self.v)

    def reshape(self, rows: int, cap: int, keep: list[tuple[int, int, int]]) -> None:
        """New tensors of `rows` rows of `cap` columns; `keep` lists (old row, new row, n): the
        first n positions each kept row takes along. Every other row starts empty. The new
        tensors exist before the old go; an allocator error leaves the pool unchanged."""
        shape = (rows, self.kv_heads, cap, self.head_dim)
        k = [zeros(shape, self.dtype, self.device) for _ in range(self.layers)]
        v = [zeros(shape, self.dtype, self.device) for _ in range(self.layers)]
        for new, old in zip(k + v, self.k + self.v):
            for src, dst, n in keep:
                if n > 0:
                    new[dst, :, :n].copy_(old[src, :, :n])
        self.k, self.v, self.rows = k, v, rows
        self.generation += 1

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

    def export(self, row: int | None, n: int) -> SavedKV:
        cpu = torch.device("cpu")
        if row is None or n <= 0:  # nothing held: an empty copy
            empty = torch.empty((self.kv_heads, 0, self.head_dim), dtype=self.dtype)
            return SavedKV((empty,) * self.layers, (empty,) * self.layers)
        return SavedKV(tuple(t[row, :, :n].to(cpu, copy=True) for t in self.k),
                       tuple(t[row, :, :n].to(cpu, copy=True) for t in self.v))

    def load(self, saved: SavedKV, row: int) -> int:
        """row's first saved.n positions := saved's (the row is long enough); returns n."""
        n = saved.n
        for dst, src in zip(self.k + self.v, saved.k + saved.v):
            dst[row, :, :n].copy_(src)
        return n


def zeros(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A zero tensor for the pool: `lazy_zeros` in host memory, torch.zeros on a device."""
    if device.type == "cpu":
        return lazy_zeros(shape, dtype)
    return torch.zeros(shape, dtype=dtype, device=device)


def lazy_zeros(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """A CPU tensor of zeros over an anonymous memory mapping: the OS maps a zeroed page on first
    touch, so pages never written cost neither memory nor time (torch.zeros writes every byte at
    once). Attention reads a row only up to its length, so a row's tail is never touched. The
    tensor keeps the mapping alive; the pages go back to the OS with it."""
    nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    if nbytes == 0:
        return torch.zeros(shape, dtype=dtype)
    return torch.frombuffer(mmap.mmap(-1, nbytes), dtype=dtype).view(shape)
