"""What a remote server is not asked for, refused with a sentence before the request leaves: a
raw prompt (the server takes chats), images (sent as text they would be lost), and constrained
output (our grammar runs in our own sampler; a server would silently ignore it). `asks_for` names
which; the local llama.cpp worker (workers/llamacpp/features.py) words the same refusals its way."""

from __future__ import annotations

from desktop.protocol import AppendInput, Chat, Command, Generate

RAW, IMAGES, GRAMMAR = "raw", "images", "grammar"


def asks_for(cmd: Command) -> str | None:
    """RAW, IMAGES or GRAMMAR when `cmd` needs what only a local torch worker gives; else None."""
    if isinstance(cmd, Chat) and cmd.raw:
        return RAW
    if isinstance(cmd, (Chat, AppendInput, Generate)) and any(m.images for m in getattr(cmd, "messages", ()) or ()):
        return IMAGES
    params = getattr(cmd, "params", None)
    if isinstance(cmd, (Chat, Generate)) and params is not None and params.grammar:
        return GRAMMAR
    return None


def unsupported(cmd: Command, url: str) -> str | None:
    """The sentence that refuses `cmd` on the remote worker at `url`; None when it may go."""
    return {
        RAW: f"Raw prompts (/v1/completions) are not sent to remote workers; the remote worker at {url} takes chats only.",
        IMAGES: f"Images are not sent to remote workers; the remote worker at {url} reads text only. Use a local vision model.",
        GRAMMAR: (f"Constrained output (a tool call the model must make, or response_format) runs in the local "
                  f"worker's sampler; the remote worker at {url} cannot be held to it. Use the local model."),
    }.get(asks_for(cmd) or "")
