"""transformers reads a GGUF file under its own tqdm bar ("Converting and de-quantizing GGUF
tensors..."), drawn on stderr: tqdm imported straight from tqdm.auto, which
`transformers.utils.logging.disable_progress_bar()` does not reach. The app reports that stage
itself (the loading banner), so while a GGUF loads the bar is made silent."""

from __future__ import annotations

import functools
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def no_gguf_progress_bar() -> Iterator[None]:
    """Within: transformers' GGUF reader draws no progress bar (restored after, also on error)."""
    try:
        from transformers import modeling_gguf_pytorch_utils as reader
    except ImportError:  # another transformers layout: nothing of ours to silence
        yield
        return
    bar = getattr(reader, "tqdm", None)
    if bar is None:
        yield
        return
    reader.tqdm = functools.partial(bar, disable=True)
    try:
        yield
    finally:
        reader.tqdm = bar
