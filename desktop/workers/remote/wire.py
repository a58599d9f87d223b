"""The OpenAI-compatible wire format, without any I/O: the body of a streamed /v1/chat/completions
request, one server-sent-events line parsed into a Piece, and a server's error body in plain words."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

from desktop.model.messages import Message
from desktop.model.params import SamplingParams


def chat_body(messages: Sequence[Message], params: SamplingParams, model: str, *, slot: int | None = None) -> dict:
    """The request for a streamed chat completion. `slot`: llama.cpp's slot to run in (id_slot), so
    a conversation comes back to the KV that holds it; None for servers without slots. Fields a
    server does not know are ignored by llama.cpp, vLLM and SGLang alike."""
    body: dict[str, Any] = {
        "messages": [{"role": m.role, "content": m.content} for m in messages],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": max(params.max_tokens, 1),  # 0 (prefill only) is sent as 1; the token is dropped
        "temperature": params.temperature,
        "top_p": params.top_p,
    }
    if model:
        body["model"] = model
    if params.top_k:
        body["top_k"] = params.top_k
    if params.repetition_penalty != 1.0:
        body["repetition_penalty"] = params.repetition_penalty  # vLLM, SGLang
        body["repeat_penalty"] = params.repetition_penalty  # llama.cpp
    if params.seed is not None:
        body["seed"] = params.seed % 2**32  # llama.cpp and vLLM take 32-bit seeds
    if params.stop:
        body["stop"] = list(params.stop)
    if params.ignore_eos:
        body["ignore_eos"] = True
    if slot is not None:
        body.update(cache_prompt=True, id_slot=slot, timings_per_token=True)
    return body


@dataclass(frozen=True, slots=True)
class Piece:
    """What one SSE line carried: text, the finish reason, the usage/timings accounting, an error."""

    delta: str = ""
    finish_reason: str = ""
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    completion_tokens: int | None = None
    prompt_ms: float | None = None
    decode_ms: float | None = None
    error: str = ""
    done: bool = False  # the [DONE] sentinel


def parse_line(line: str) -> Piece | None:
    """One line of the event stream; None for blank lines, comments and fields we do not use."""
    line = line.strip()
    if line.startswith("data:"):
        data = line[5:].strip()
    elif line.startswith("error:"):  # llama.cpp sends a failure mid-stream as its own event
        data = line[6:].strip()
    else:
        return None
    if data == "[DONE]":
        return Piece(done=True)
    try:
        obj = json.loads(data)
    except ValueError:
        return Piece(error=f"the server sent something that is not JSON: {data[:80]!r}")
    if not isinstance(obj, dict):
        return None
    if "error" in obj or line.startswith("error:"):
        return Piece(error=error_text(obj))
    choices = obj.get("choices") or []
    choice = choices[0] if choices and isinstance(choices[0], dict) else {}
    delta = choice.get("delta") or {}
    usage = obj.get("usage") or {}
    timings = obj.get("timings") or {}
    details = usage.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens")
    if cached is None and "cache_n" in timings:
        cached = timings["cache_n"]
    prompt = usage.get("prompt_tokens")
    if prompt is None and "prompt_n" in timings:  # llama.cpp's own accounting: computed + reused
        prompt = timings["prompt_n"] + timings.get("cache_n", 0)
    return Piece(
        delta=delta.get("content") or "",
        finish_reason=choice.get("finish_reason") or "",
        prompt_tokens=_int(prompt),
        cached_tokens=_int(cached),
        completion_tokens=_int(usage.get("completion_tokens")),
        prompt_ms=_float(timings.get("prompt_ms")),
        decode_ms=_float(timings.get("predicted_ms")),
    )


def error_text(obj: Any) -> str:
    """The message of an OpenAI-style error body ({"error": {"message": ...}} or variants)."""
    if isinstance(obj, dict):
        err = obj.get("error", obj)
        if isinstance(err, dict):
            msg = err.get("message") or err.get("msg") or err.get("detail")
            if msg:
                return str(msg)[:500]
        elif isinstance(err, str):
            return err[:500]
        if "detail" in obj:
            return str(obj["detail"])[:500]
    return str(obj)[:500]


def body_error(raw: bytes) -> str:
    """An HTTP error response's body in words (JSON error or the first line of text)."""
    try:
        return error_text(json.loads(raw))
    except ValueError:
        text = raw.decode("utf-8", "replace").strip()
        return text.splitlines()[0][:300] if text else ""


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
