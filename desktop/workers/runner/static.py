"""StaticRunner: the Runner for Llama-family models over preallocated KV (model/kv_pool.py).

A slot that holds KV owns a row of the pool; its length is an int here, so crop is free and a
branch is a copy of a row prefix. The pool has rows only for slots that hold KV, each as long as
the longest needs (kv_shape.PaddedRows): when a slot needs a row or more columns than the pool
has, the pool is reshaped to what the slots hold now (rows of emptied slots and columns of
evicted long conversations go), so what it allocates stays within the worker's KV budget, which
the scheduler keeps with the same shape rule (`footprint`). Decoding rows are kept at the front
of the pool (rows 0..B-1): when a slot joins the decode batch from a row further down, it swaps
rows with a slot that is not decoding (one copy of both prefixes, once per join), so every step
reads the pool through plain views, with no gather and no re-stacking. A forward only ever writes positions at or past a row's length, so a
forward cut short leaves every row's valid prefix intact. Steps come from runner/steps.py
(eager, or fixed shapes captured in CUDA graphs)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

from desktop.errors import InvalidRequest, OmnideskError
from desktop.model.fast_llama import FastLlama
from desktop.model.kv_pool import MIN_CAP, SavedKV
from desktop.model.kv_shape import PaddedRows, pool_cap, pow2_at_least
from desktop.model.sampling import Sampler
from desktop.workers.runner.base import DecodeRow, Runner, sample_rows
from desktop.workers.runner.steps import make_steps


class StaticRunner(Runner):
    kv_layout = "static-1"  # per layer k.i / v.i: [kv_heads, n, head_dim]

    def __init__(self, model: Any, num_slots: int, kv_bytes_per_token: int, steps: str = "auto",
                 budget_bytes: int = 1 << 62, batch_hint: int | None = None) -> None:
        self.net = FastLlama(model, batch_hint=batch_hint or num_slots)  # the decode batch it is tuned for
        self.device = self.net.device
        self.num_slots, self.budget = num_slots, budget_bytes
        self.pool = self.net.new_pool(0, MIN_CAP)  # rows come as slots take KV
        self.kv_bytes_per_token = self.pool.bytes_per_position
        self.rows = PaddedRows(self.kv_bytes_per_token, self.pool.max_len)
        self.steps = make_steps(self.net, steps)
        self.lens = [0] * num_slots
        self.row_of: list[int | None] = [None] * num_slots  # slot -> pool row (None: holds no KV)
        self.slot_of: list[int | None] = []  # pool row -> slot (None: a free row)

    @property
    def footprint(self) -> PaddedRows:
        return self.rows

    # ------------------------------------------------------------------ forwards

    def prefill(self, slot: int, ids: Sequence[int], sample: tuple[Any, Sequence[int]] | None = None,
                media: Any = None) -> int | None:
        if media or any(t < 0 for t in ids):
            raise InvalidRequest("The static runner takes text only; images need a vision model (runner 'hf').")
        start, n = self.lens[slot], len(ids)
        self._room(slot, start + n)
        tok = torch.tensor([list(ids)], dtype=torch.long, device=self.device)
        pos = torch.arange(start, start + n, device=self.device)[None]
        logits = self.net.forward(self.pool, self.row_of[slot], tok, pos, start + n, tail=True)
        self.lens[slot] = start + n
        if sample is None:
            return None
        sampler, history = sample
        return sampler(logits[0], history)

    def decode(self, rows: Sequence[DecodeRow]) -> list[int | Exception]:
        for r in rows:  # every row has a row and room for one more position
            self._room(r.slot, self.lens[r.slot] + 1)
        self._to_front([r.slot for r in rows])
        ordered = sorted(rows, key=lambda r: self.row_of[r.slot])  # row i of the step is pool row i
        positions = [self.lens[r.slot] for r in ordered]
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
        self.pool.swap(a, b, max(self._len(sa), self._len(sb)))
        self.slot_of[a], self.slot_of[b] = sb, sa
        if sa is not None:
            self.row_of[sa] = b
        if sb is not None:
            self.row_of[sb] = a

    def _len(self, slot: int | None) -> int:
        return 0 if slot is None else self.lens[slot]

    # ------------------------------------------------------------------ the pool's shape

    def _room(self, slot: int, n: int) -> None:
        """Make `slot` own a row with room for n positions: a free row if there is one and the
        pool is long enough; else the pool is reshaped to the rows that hold KV now (plus this
        one), as long as the longest needs. Raises, with the pool unchanged, if that shape is
        over the budget (the scheduler reserves within it, so this is a safety net)."""
        if n > self.pool.max_len:
            raise ValueError(f"{n} positions exceed the model's context ({self.pool.max_len})")
        row = self.row_of[slot]
        if pool_cap(n, self.pool.max_len) <= self.pool.cap:
            if row is not None:
                return
            free = next((r for r, s in enumerate(self.slot_of) if s is None), None)
            if free is not None:
                self.slot_of[free], self.row_of[slot] = slot, free
                return
        held = sorted((s for s in range(self.num_slots) if self.row_of[s] is not None and self.lens[s] > 0),
                      key=lambda s: self.row_of[s])  # in row order: decoding rows stay in front
        if slot not in held:
            held.append(slot)
        longest = max(n, *(self.lens[s] for s in held))
        need = self.rows.rows_bytes(len(held), longest)
        if need > self.budget:
            raise OmnideskError(
                f"This needs {need / 2**20:.0f} MiB of KV memory, more than the worker's budget of "
                f"{self.budget / 2**20:.0f} MiB; raise the budget or use fewer slots.", code="out_of_memory")
        # room for more conversations, up to the next power of two of rows as far as the budget
        # allows: with many slots a new conversation then takes a free row instead of a reshape
        fit = self.budget // max(self.rows.rows_bytes(1, longest), 1)
        rows = max(len(held), min(self.num_slots, pow2_at_least(len(held)), fit))
        keep = [(self.row_of[s], i, self.lens[s]) for i, s in enumerate(held) if self.row_of[s] is not None]
        self.pool.reshape(rows, pool_cap(longest, self.pool.max_len), keep)
        self.row_of = [None] * self.num_slots
        self.slot_of = [None] * rows
        for i, s in enumerate(held):
            self.row_of[s], self.slot_of[i] = i, s

    # ------------------------------------------------------------------ KV bookkeeping

    def kv_len(self, slot: int) -> int:
        return self.lens[slot]

    def crop(self, slot: int, n: int) -> None:
        self.lens[slot] = min(self.lens[slot], max(n, 0))
        if not self.lens[slot]:
            self.clear(slot)

    def copy_prefix(self, src: int, dst: int, n: int) -> None:
        n = min(n, self.lens[src])
        if src == dst:
            self.crop(dst, n)
            return
        self.clear(dst)
        if n <= 0:
            return
        self._room(dst, n)  # may reshape: rows are looked up after it
        self.pool.copy(self.row_of[src], self.row_of[dst], n)
        self.lens[dst] = n

    def clear(self, slot: int) -> None:
        """Drop the slot's KV; its row becomes free (the pool sheds it at its next reshape)."""
        self.lens[slot] = 0
        row, self.row_of[slot] = self.row_of[slot], None
        if row is not None:
            self.slot_of[row] = None

    def export_prefix(self, slot: int, n: int) -> SavedKV:
        return self.pool.export(self.row_of[slot], min(n, self.lens[slot]))

    def import_prefix(self, saved: SavedKV, slot: int, room: int = 0) -> None:
        self.clear(slot)
        if saved.n:  # the row is sized for the prompt at once: a restore near a power of two is
            self._room(slot, min(max(saved.n, room), self.pool.max_len))  # not copied again by the prefill
            self.lens[slot] = self.pool.load(saved, self.row_of[slot])

    def saved_nbytes(self, saved: SavedKV) -> int:
        return saved.nbytes

    def pack(self, saved: SavedKV) -> tuple[dict[str, torch.Tensor], dict]:
        tensors = {f"k.{i}": t for i, t in enumerate(saved.k)} | {f"v.{i}": t for i, t in enumerate(saved.v)}
        return tensors, {"layers": len(saved.k)}

    def unpack(self, tensors: dict[str, torch.Tensor], meta: dict, n: int) -> SavedKV:
        layers = range(int(meta["layers"]))
        return SavedKV(tuple(tensors[f"k.{i}"][:, :n] for i in layers), tuple(tensors[f"v.{i}"][:, :n] for i in layers))

    # ------------------------------------------------------------------ liveness

    def watch_layers(self, on_layer: Callable[[], None] | None) -> None:
        self.net.on_layer = on_layer
