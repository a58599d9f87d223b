"""Progress while transformers loads a model's weights: its "Loading weights" loop (one step per
tensor) reported as the loader's stage with a fraction, through transformers' own tqdm hook (its
bars stay off), so a large model's load shows how far it got and, from that, the time left."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

Report = Callable[[str, "float | None"], None]
WEIGHTS_DESC = "Loading weights"  # transformers' description of the loop over a checkpoint's tensors
EVERY_S = 0.25  # at most 4 reports a second: each one is a message to the app


class CountedLoop:
    """Iterates what transformers' bar would, reporting `stage` with the fraction done."""

    def __init__(self, items: Any, total: int, stage: str, report: Report, clock: Callable[[], float]) -> None:
        self.items, self.total, self.stage, self.report, self.clock = items, max(total, 1), stage, report, clock

    def __iter__(self) -> Iterator[Any]:
        last = self.clock()
        for done, item in enumerate(self.items):
            now = self.clock()
            if now - last >= EVERY_S:
                self.report(self.stage, done / self.total)
                last = now
            yield item

    def __enter__(self) -> "CountedLoop":
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __getattr__(self, _name: str) -> Callable[..., None]:  # update, close, set_postfix…: nothing to draw
        return lambda *args, **kwargs: None


@contextmanager
def weights_progress(report: Report, stage: str = "Loading model…", clock: Callable[[], float] = time.monotonic) -> Iterator[None]:
    """Within: transformers' weight loading reports `stage` with its fraction (the previous hook is
    restored after, also on error). Other bars are left as transformers makes them."""
    from transformers.utils import logging as hf_logging

    def hook(factory: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        items = args[0] if args else kwargs.get("iterable")
        if kwargs.get("desc") != WEIGHTS_DESC or items is None:
            return factory(*args, **kwargs)
        total = kwargs.get("total") or (len(items) if hasattr(items, "__len__") else 0)
        return CountedLoop(items, total, stage, report, clock)

    previous = hf_logging.set_tqdm_hook(hook)
    try:
        yield
    finally:
        hf_logging.set_tqdm_hook(previous)
