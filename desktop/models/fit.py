"""Whether a model fits this machine, from the readiness check's choices (workers/readiness.py):
the room left for weights once the KV budget and the app's reserve are set aside, against what
the model needs — a GGUF file about its size (llama.cpp keeps it quantised), a folder its
parameters in the chosen dtype."""

from __future__ import annotations

from dataclasses import dataclass

from desktop.models.facts import Kind, ModelFacts, human_bytes
from desktop.workers.readiness import BYTES, Choices

GGUF_OVERHEAD = 1.3  # resident memory over file size (issue 23: the GGUF target)


@dataclass(frozen=True)
class Fit:
    fits: bool
    needs: int  # bytes
    reason: str


def room(choices: Choices) -> int:
    """Bytes the readiness check leaves for a model's weights (largest_model_b in its dtype)."""
    return int(float(choices.largest_model_b.value) * 1e9 * BYTES[str(choices.dtype.value)])


def fit(facts: ModelFacts, choices: Choices) -> Fit:
    dtype = str(choices.dtype.value)
    if facts.kind is Kind.EMBEDDED and facts.params:  # the torch runner holds it unpacked, in the chosen dtype
        needs, what = facts.params * BYTES[dtype], f"{facts.params / 1e6:.0f}M parameters in {dtype}"
    elif facts.kind is Kind.GGUF and facts.size_bytes:
        needs, what = int(facts.size_bytes * GGUF_OVERHEAD), "its file size and a little more"
    elif facts.params:
        needs, what = facts.params * BYTES[dtype], f"{facts.params / 1e9:.1f}B parameters in {dtype}"
    else:
        return Fit(True, 0, "Its size is not known: it may or may not fit.")
    free = room(choices)
    where = "the GPU" if choices.device.value == "cuda" else "RAM"
    if needs <= free:
        return Fit(True, needs, f"Needs about {human_bytes(needs)} ({what}); {human_bytes(free)} of {where} is free for it.")
    return Fit(False, needs, f"Needs about {human_bytes(needs)} ({what}) but only {human_bytes(max(free, 0))} of "
                             f"{where} is free for it: it would not fit.")
