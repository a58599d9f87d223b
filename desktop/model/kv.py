"""Per-sequence KV caches and the left-padded decode batch that stacks them.

A sequence's KV lives in a batch-1 DynamicCache while it sits in a slot; while it decodes it is
one row of a DecodeBatch. Rows of different lengths share one cache by LEFT-padding K/V: the
pad columns are hidden by the attention mask and each row gets its own position ids."""

from __future__ import annotations

from typing import Hashable

import torch
from transformers import DynamicCache


def new_cache(config) -> DynamicCache:
    return DynamicCache(config=config)


def as_batch(ids: list[int], device) -> torch.Tensor:
    """A [1, n] id tensor for a batch-1 forward."""
    return torch.tensor([ids], device=device)


def cache_len(cache: DynamicCache | None) -> int:
    return 0 if cache is None else cache.get_seq_length()


def agreed_len(cache: DynamicCache | None) -> int:
    """The cache's length when every layer holds the same number of positions, else -1.

    `cache_len` reads layer 0 only; a forward cut short between two layers (an exception raised
    inside it) leaves the layers one apart, which only this check sees."""
    if cache is None:
        return 0
    layers = _layers_kv(cache)
    if not layers:
        return 0
    lens = {k.shape[-2] for k, _ in layers} | {v.shape[-2] for _, v in layers}
    if len(lens) != 1 or len(layers) != len(cache.layers):  # a layer left out counts as empty
        return -1
    return lens.pop()


def crop_to(cache: DynamicCache, n: int) -> None:
    """Keep the first n positions (in place)."""
    extra = cache_len(cache) - n
    if extra > 0:
        cache.crop(-extra)


def clone_prefix(cache: DynamicCache, n: int) -> DynamicCache:
    """An independent copy of the first n positions (a branch of a conversation)."""
    return from_layers([(k[:, :, :n].clone(), v[:, :, :n].clone()) for k, v in _layers_kv(cache)])


def to_device(cache: DynamicCache, device, copy: bool = False) -> DynamicCache:
    """The cache on `device`; a fresh copy when `copy` (or when it moves)."""
    layers = _layers_kv(cache)
    if not copy and all(k.device == torch.device(device) for k, _ in layers):
        return cache
    return from_layers([(k.to(device, copy=copy), v.to(device, copy=copy)) for k, v in layers])


def layers_kv(cache: DynamicCache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each layer's (keys, values)."""
    return _layers_kv(cache)


def _layers_kv(cache: DynamicCache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(layer.keys, layer.values) for layer in cache.layers if getattr(layer, "is_initialized", False)]


def from_layers(kv: list[tuple[torch.Tensor, torch.Tensor]]) -> DynamicCache:
    cache = DynamicCache()
    for i, (k, v) in enumerate(kv):
        cache.update(k, v, i)
    return cache


def nbytes(cache: DynamicCache | None) -> int:
    if cache is None:
        return 0
    return sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in _layers_kv(cache))


class DecodeBatch:
    """The running sequences of one worker stacked into one batched cache.

    Row i holds `pads[i]` pad columns on the left, then its real tokens. Joining re-stacks (a copy,
    rare); leaving slices the row back out (also rare); each decode step appends one column."""

    def __init__(self) -> None:
        self.keys: list[Hashable] = []
        self.pads: list[int] = []
        self.cache: DynamicCache | None = None

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def width(self) -> int:
        return cache_len(self.cache)

    def row_len(self, key: Hashable) -> int:
        return self.width - self.pads[self.keys.index(key)]

    def add(self, key: Hashable, cache: DynamicCache) -> None:
        """Join: left-pad the new row or the existing rows to a common width and concatenate."""
        n = cache_len(cache)
        if self.cache is None or not self.keys:
            self.keys, self.pads, self.cache = [key], [0], cache
            return
        w = self.width
        width = max(w, n)
        old = [(_pad_left(k, width - w), _pad_left(v, width - w)) for k, v in _layers_kv(self.cache)]
        new = [(_pad_left(k, width - n), _pad_left(v, width - n)) for k, v in _layers_kv(cache)]
        self.cache = from_layers([(torch.cat([ok, nk]), torch.cat([ov, nv])) for (ok, ov), (nk, nv) in zip(old, new)])
        self.pads = [p + width - w for p in self.pads] + [width - n]
        self.keys.append(key)

    def remove(self, key: Hashable) -> DynamicCache:
        """Leave: return the row's own batch-1 cache (pads cut off, fresh memory)."""
        i = self.keys.index(key)
        pad = self.pads[i]
        row = from_layers([(k[i : i + 1, :, pad:].clone(), v[i : i + 1, :, pad:].clone()) for k, v in _layers_kv(self.cache)])
        keep = [j for j in range(len(self.keys)) if j != i]
        self.keys = [self.keys[j] for j in keep]
        self.pads = [self.pads[j] for j in keep]
        if not keep:
            self.cache = None
            return row
        trim = min(self.pads)  # columns that are padding in every remaining row
        idx = torch.tensor(keep, device=_layers_kv(self.cache)[0][0].device)
        self.cache = from_layers([(k[idx, :, trim:], v[idx, :, trim:]) for k, v in _layers_kv(self.cache)])
        self.pads = [p - trim for p in self.pads]
        return row

    def step_inputs(self, tokens: list[int], device) -> dict:
        """Forward kwargs for one decode step: the new token of each row, a [B, width+1] mask that
        hides every row's pads, and per-row positions = the row's true length (pads excluded)."""
        width = self.width
        mask = torch.ones(len(self.keys), width + 1, dtype=torch.long, device=device)
        for i, pad in enumerate(self.pads):
            mask[i, :pad] = 0
        positions = torch.tensor([[width - p] for p in self.pads], device=device)
        ids = torch.tensor([[t] for t in tokens], device=device)
        return dict(input_ids=ids, attention_mask=mask, position_ids=positions, past_key_values=self.cache)


def _pad_left(x: torch.Tensor, n: int) -> torch.Tensor:
    if n <= 0:
        return x
    b, h, _, d = x.shape
    return torch.cat([x.new_zeros(b, h, n, d), x], dim=2)
