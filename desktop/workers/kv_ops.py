"""KV operations the scheduler asks of the runner, in slot indices, ids and lengths (no torch).
The scheduler queues them in the order it decides; the worker loop applies them in that order
(`apply`) before anything else touches those slots."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Union

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Crop:
    """Keep the first n positions of the slot's KV."""

    slot: int
    n: int


@dataclass(frozen=True, slots=True)
class CopyPrefix:
    """dst's KV := the first n positions of src's (a branch of a conversation)."""

    src: int
    dst: int
    n: int


@dataclass(frozen=True, slots=True)
class Clear:
    """Drop the slot's KV (evicted, failed, ended)."""

    slot: int


@dataclass(frozen=True, slots=True)
class Restore:
    """slot's KV := a copy of a saved prefix (an export kept by the SPC, or read from disk);
    `room`: the positions the slot will hold once its prompt is in (0: just the saved ones), so
    that the runner sizes its memory once, not again at the prefill right after."""

    saved: Any
    slot: int
    room: int = 0


@dataclass(frozen=True, slots=True)
class Fill:
    """Prefill `ids` into the (empty) slot, in forwards of at most `chunk` ids, sampling nothing."""

    slot: int
    ids: tuple[int, ...]
    chunk: int


@dataclass(frozen=True, slots=True)
class Save:
    """Export the first len(ids) positions of the slot's KV (they hold `ids`) into the SPC."""

    slot: int
    ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Spill:
    """Export the slot's KV (it holds state.ids) for the disk tier's writer, before the slot's
    Clear (its conversation leaves RAM)."""

    slot: int
    state: Any  # kv_disk.state.SnapState


KvOp = Union[Crop, CopyPrefix, Clear, Restore, Fill, Save, Spill]


def apply(op: KvOp, runner: Any, save: Callable[[tuple[int, ...], Any, int], None],
          spill: Callable[[Any, Any, int], None] | None = None) -> None:
    """Run one op on `runner` (a workers.runner.Runner); `save(ids, saved, nbytes)` keeps an export,
    `spill(state, saved, nbytes)` hands one to the disk writer."""
    if isinstance(op, Crop):
        runner.crop(op.slot, op.n)
    elif isinstance(op, CopyPrefix):
        runner.copy_prefix(op.src, op.dst, op.n)
    elif isinstance(op, Clear):
        runner.clear(op.slot)
    elif isinstance(op, Restore):
        runner.import_prefix(op.saved, op.slot, op.room)
    elif isinstance(op, Fill):
        for i in range(0, len(op.ids), op.chunk):
            runner.prefill(op.slot, op.ids[i : i + op.chunk])
    elif isinstance(op, Save):
        saved = runner.export_prefix(op.slot, len(op.ids))
        save(op.ids, saved, runner.saved_nbytes(saved))
    elif isinstance(op, Spill):
        if spill is not None:
            try:
                saved = runner.export_prefix(op.slot, len(op.state.ids))
                spill(op.state, saved, runner.saved_nbytes(saved))
            except Exception as exc:  # a snapshot not taken never fails the request at hand
                log.warning("Slot %d: its KV was not saved to disk: %s", op.slot, exc)
    else:
        raise TypeError(f"Unknown KV operation {op!r}")
