"""What a GGUF model on llama.cpp cannot do here, said before the request reaches the server: what
needs our own KV or sampler (images, constrained output, raw completions) is refused with a
sentence that says how to get it (the torch runner for GGUF files). Everything else passes."""

from __future__ import annotations

from desktop.protocol import Command
from desktop.workers.remote.unsupported import GRAMMAR as GRAMMAR_ASKED
from desktop.workers.remote.unsupported import IMAGES as IMAGES_ASKED
from desktop.workers.remote.unsupported import RAW as RAW_ASKED
from desktop.workers.remote.unsupported import asks_for

TORCH = "choose the torch runner for GGUF files in Settings → Model"
IMAGES = f"This GGUF model runs on llama.cpp, which reads text only here: to send images, {TORCH}."
GRAMMAR = (f"Constrained output (a tool call the model must make, or response_format) is not available on "
           f"llama.cpp here: {TORCH}.")
NO_SLIDE = ("On llama.cpp the oldest messages do not slide out of view: start a new chat, raise the cache "
            f"memory budget (Settings → Cache), or {TORCH}.")
RAW = f"Raw prompts (/v1/completions) are not available for a GGUF model on llama.cpp: use chat completions, or {TORCH}."


def refusal(cmd: Command) -> tuple[str, str] | None:
    """(error code, sentence) when `cmd` asks for what llama.cpp cannot give here; else None."""
    said = {IMAGES_ASKED: IMAGES, RAW_ASKED: RAW, GRAMMAR_ASKED: GRAMMAR}.get(asks_for(cmd) or "")
    return ("invalid_request", said) if said else None
