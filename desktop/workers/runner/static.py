"""StaticRunner: the Runner for Llama-family models over preallocated KV (model/kv_pool.py).

A slot is a row of the pool; its length is an int here, so crop is free and a branch is a copy
of a row prefix. Decoding rows are kept at the front of the pool (rows 0..B-1): when a slot joins
the decode batch from a row further down, it swaps rows with a slot that is not decoding (one
copy of both prefixes, once per join), so every step reads the pool through plain views, with no
gather and no re-stacking. A forward only ever writes positions at or past a row's length, so a
forward cut short leaves every row's valid prefix intact. Steps come from runner/steps.py
(eager, or fixed shapes captured in CUDA graphs)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

from desktop.errors import InvalidRequest
from desktop.model.fast_llama import FastLlama
from desktop.model.kv_pool import MIN_CAP, SavedKV
from desktop.model.sampling import Sampler
from desktop.workers.runner.base import DecodeRow, Runner, sample_rows
from desktop.workers.runner.steps import make_steps


class StaticRunner(Runner):
    def __init__(self, model: Any, num_slots: int, kv_bytes_per_token: int, steps: str = "auto") -> None:
        self.net = FastLlama(model, batch_hint=num_slots)
        self.device = self.net.device
        self.num_slots, self.kv_bytes_per_token = num_slots, kv_bytes_per_token
        self.pool = self.net.new_pool(num_slots, MIN_CAP)
        self.steps = make_steps(self.net, steps)
        self.lens = [0] * num_slots
        self.row_of = list(range(num_slots))  # slot -> pool row
        self.slot_of = list(range(num_slots))  # pool row -> slot

    # ------------------------------------------------------------------ forwards

    def prefill(self, slot: int, ids: Sequence[int], sample: tuple[Any, Sequence[int]] | None = None,
                media: Any = None) -> int | None:
        if media or any(t < 0 for t in ids):
            raise InvalidRequest("The static runner takes text only; images need a vision model (runner 'hf').")
        start, n = self.lens[slot], len(ids)
        self.pool.reserve(start + n)
        tok = torch.tensor([list(ids)], dtype=torch.long, device=self.device)
        pos = torch.arange(start, start + n, device=self.device)[None]
        logits = self.net.forward(self.pool, self.row_of[slot], tok, pos, start + n)
        self.lens[slot] = start + n
        if sample is None:
            return None
        sampler, history = sample
        return sampler(logits[0], history)

    def decode(self, rows: Sequence[DecodeRow]) -> list[int | Exception]:
        self._to_front([r.slot for r in rows])
        ordered = sorted(rows, key=lambda r: self.row_of[r.slot])  # row i of the step is pool row i
        positions = [self.lens[r.slot] for r in ordered]
        self.pool.reserve(max(positions) + 1)
        logits = self.steps(self.pool, [r.token for r in ordered], positions)
        for r in ordered:
            self.lens[r.slot] += 1
        result = dict(zip((r.slot for r in ordered), sample_rows(ordered, logits)))
        return [result[r.slot] for r in rows]

    def sampler(self, params: Any) -> Sampler:
        return Sampler(params, str(self.device))

    def _to_front(self, slots: list[int]) -> None:
        """Move the rows of `slots` to rows 0..len(slots)-1 by swapping with slots that are not in it."""
        wanted, b = set(slots), len(slots)
        free = [r for r in range(b) if self.slot_of[r] not in wanted]
        for slot in slots:
            if self.row_of[slot] >= b:
                self._swap_rows(self.row_of[slot], free.pop())

    def _swap_rows(self, a: int, b: int) -> None:
        sa, sb = self.slot_of[a], self.slot_of[b]
        self.pool.swap(a, b, max(self.lens[sa], self.lens[sb]))
        self.slot_of[a], self.slot_of[b] = sb, sa
        self.row_of[sa], self.row_of[sb] = b, a

    # ------------------------------------------------------------------ KV bookkeeping

    def kv_len(self, slot: int) -> int:
        return self.lens[slot]

    def crop(self, slot: int, n: int) -> None:
        self.lens[slot] = min(self.lens[slot], max(n, 0))

    def copy_prefix(self, src: int, dst: int, n: int) -> None:
        n = min(n, self.lens[src])
        self.pool.copy(self.row_of[src], self.row_of[dst], n)
        self.lens[dst] = n

    def clear(self, slot: int) -> None:
        self.lens[slot] = 0

    def export_prefix(self, slot: int, n: int) -> SavedKV:
        return self.pool.export(self.row_of[slot], min(n, self.lens[slot]))

    def import_prefix(self, saved: SavedKV, slot: int) -> None:
        self.lens[slot] = 0
        self.lens[slot] = self.pool.load(saved, self.row_of[slot])

    def saved_nbytes(self, saved: SavedKV) -> int:
        return saved.nbytes

    # ------------------------------------------------------------------ liveness

    def watch_layers(self, on_layer: Callable[[], None] | None) -> None:
        self.net.on_layer = on_layer
