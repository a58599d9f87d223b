"""What a GGUF model on llama.cpp cannot do here, said before the request reaches the server: what
needs our own KV or sampler (images, constrained output, raw completions) is refused with a
sentence that says how to get it (the torch runner for GGUF files). Everything else passes."""

from __future__ import annotations

from desktop.protocol import AppendInput, Chat, Command, Generate

TORCH = "choose the torch runner for GGUF files in Settings → Model"
IMAGES = f"This GGUF model runs on llama.cpp, which reads text only here: to send images, {TORCH}."
GRAMMAR = (f"Constrained output (a tool call the model must make, or response_format) is not available on "
           f"llama.cpp here: {TORCH}.")
NO_SLIDE = ("On llama.cpp the oldest messages do not slide out of view: start a new chat, raise the cache "
            f"memory budget (Settings → Cache), or {TORCH}.")
RAW = f"Raw prompts (/v1/completions) are not available for a GGUF model on llama.cpp: use chat completions, or {TORCH}."


def refusal(cmd: Command) -> tuple[str, str] | None:
    """(error code, sentence) when `cmd` asks for what llama.cpp cannot give here; else None."""
    messages = getattr(cmd, "messages", ())
    if isinstance(cmd, (Chat, AppendInput, Generate)) and any(m.images for m in messages):
        return "invalid_request", IMAGES
    if isinstance(cmd, Chat) and cmd.raw:
        return "invalid_request", RAW
    if isinstance(cmd, (Chat, Generate)) and cmd.params.grammar:
        return "invalid_request", GRAMMAR
    return None
