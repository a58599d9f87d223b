"""One clear ModelLoadError for whatever loading a model raises: out of memory, corrupt weights,
custom code (never run), or anything transformers refuses, with the cause chained."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from desktop.errors import ModelLoadError, OmnideskError


@contextmanager
def load_errors(what: str) -> Iterator[None]:
    """Turn anything a load raises into a ModelLoadError naming `what`, cause chained."""
    import torch

    try:
        yield
    except OmnideskError:
        raise
    except (MemoryError, torch.OutOfMemoryError) as exc:
        raise _out_of_memory(what) from exc
    except Exception as exc:
        if "custom code" in str(exc) or "trust_remote_code" in str(exc):
            raise ModelLoadError(
                f"Could not load {what}: it needs custom code (Python files that come with the model), and "
                "Omnidesk never runs code from a model folder. This model is not supported; choose one that "
                "transformers supports without custom code."
            ) from exc
        detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        if "out of memory" in detail.lower() or "can't allocate memory" in detail.lower():
            raise _out_of_memory(what) from exc
        if type(exc).__name__ == "SafetensorError":
            raise ModelLoadError(
                f"The weights of {what} are corrupt or incomplete ({detail}). "
                "Download or export the model again."
            ) from exc
        raise ModelLoadError(
            f"Could not load {what}: {detail}. The files may be corrupt or incompletely downloaded, "
            "or of a kind this version of transformers cannot load."
        ) from exc


def _out_of_memory(what: str) -> ModelLoadError:
    return ModelLoadError(
        f"Out of memory while loading {what}. Try a smaller dtype (bfloat16), a smaller model, "
        "or close other programs to free memory."
    )
