"""The model runner's interface: every tensor operation of a worker goes through it.

The scheduler and the worker loop speak to a runner in token ids, slot indices and lengths only
(no torch here). A runner keeps one KV per slot: `kv_len(slot)` ids of it are valid, and each
operation below either completes or leaves the slots it touched in a state `kv_len` reports
truly (a forward cut short may leave a slot unreliable: `kv_len` is then -1).

Implementations: `hf.HFRunner` (any transformers causal LM, a DynamicCache per slot) and
`static.StaticRunner` (Llama-family models: preallocated per-layer KV, fixed-shape decode
steps, compiled on CPU, CUDA graphs on GPU)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from desktop.model.kv_shape import PerToken
from desktop.model.sampling import sample_batch


@dataclass(frozen=True, slots=True)
class DecodeRow:
    """One running sequence in a decode step: feed `token` at position kv_len(slot), then sample
    the next token with `sampler` (from `Runner.sampler`); `history` is given only when the
    sampler needs it (repetition penalties): the prompt and every generated id so far."""

    slot: int
    token: int
    sampler: Any
    history: Sequence[int] = ()


class Runner(ABC):
    """A model and the KV of `num_slots` slots. Used from one thread (the worker loop's)."""

    num_slots: int
    kv_bytes_per_token: int  # what one token's K/V costs in every layer (the slot budget's unit)
    kv_layout: str = ""  # names the layout of pack's tensors (snapshots on disk); "" = cannot pack

    @property
    def footprint(self) -> Callable[[Sequence[int]], int]:
        """What this runner's KV takes for slots of the given lengths (the scheduler keeps the
        budget with it). Default: each slot its own length (a cache that grows token by token)."""
        return PerToken(self.kv_bytes_per_token)

    # ------------------------------------------------------------------ forwards

    @abstractmethod
    def prefill(self, slot: int, ids: Sequence[int], sample: tuple[Any, Sequence[int]] | None = None,
                media: Mapping[int, Any] | None = None) -> int | None:
        """Append `ids` to the slot's KV (positions kv_len(slot) onwards) in one forward. With
        `sample` = (sampler, history), sample and return the token that follows; else None.
        Negative ids are image positions (model/images.py): `media` maps each such key to its
        ImageData, and `ids` hold every image they touch whole."""

    @abstractmethod
    def decode(self, rows: Sequence[DecodeRow]) -> list[int | Exception]:
        """One decode step for every row (distinct slots, each with its KV valid). Returns one
        sampled token per row, or the exception that row's sampling raised (that row alone ends).
        If the forward itself raises, every row's slot is left unreliable (kv_len -1 or 0) and
        the exception propagates. The runner may keep batch state between calls; any other
        operation on one of these slots sees its KV up to date."""

    @abstractmethod
    def sampler(self, params: Any) -> Any:
        """A sampler for one request's SamplingParams (its own seeded generator, on the device);
        it has `needs_history`."""

    # ------------------------------------------------------------------ KV bookkeeping

    @abstractmethod
    def kv_len(self, slot: int) -> int:
        """Positions of the slot's KV that hold valid K/V (in every layer), or -1 when its layers
        disagree (a forward cut short)."""

    @abstractmethod
    def crop(self, slot: int, n: int) -> None:
        """Keep the first n positions of the slot's KV."""

    @abstractmethod
    def copy_prefix(self, src: int, dst: int, n: int) -> None:
        """dst's KV := the first n positions of src's (src is left as it was)."""

    @abstractmethod
    def clear(self, slot: int) -> None:
        """Drop the slot's KV (kv_len 0)."""

    @abstractmethod
    def export_prefix(self, slot: int, n: int) -> Any:
        """An independent copy of the first n positions of the slot's KV, kept in host memory
        (the system prompt cache keeps these)."""

    @abstractmethod
    def import_prefix(self, saved: Any, slot: int, room: int = 0) -> None:
        """slot's KV := a copy of `saved` (from export_prefix); `room`: the positions the slot
        will hold soon after (its prompt), a hint for a runner that sizes its memory ahead."""

    @abstractmethod
    def saved_nbytes(self, saved: Any) -> int:
        """Bytes held by one export."""

    def pack(self, saved: Any) -> tuple[dict[str, Any], dict]:
        """An export as named CPU tensors plus JSON-able metadata (a snapshot on disk, kv_disk)."""
        raise NotImplementedError(f"{type(self).__name__} cannot save its KV to disk")

    def unpack(self, tensors: dict[str, Any], meta: dict, n: int) -> Any:
        """The export `pack` made, cut to its first n positions (for import_prefix)."""
        raise NotImplementedError(f"{type(self).__name__} cannot load KV from disk")

    # ------------------------------------------------------------------ liveness

    def watch_layers(self, on_layer: Callable[[], None] | None) -> None:
        """Call `on_layer` after each decoder layer a forward runs (heartbeats count them);
        None stops it. A runner that replays whole steps (graphs, compiled code) may call it
        once per step instead."""


def sample_rows(rows: Sequence[DecodeRow], logits: Any) -> list[int | Exception]:
    """One token per row from `logits` [len(rows), vocab]; if the batch sampler raises, each row
    alone, so that only a failing row ends (its exception in its place)."""
    samplers, histories = [r.sampler for r in rows], [r.history for r in rows]
    try:
        return sample_batch(samplers, logits, histories)
    except Exception:
        out: list[int | Exception] = []
        for i, r in enumerate(rows):
            try:
                out.append(r.sampler(logits[i], histories[i]))
            except Exception as exc:
                out.append(exc)
        return out
