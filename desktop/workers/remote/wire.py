"""The OpenAI-compatible wire format, without any I/O: the body of a streamed /v1/chat/completions
request, one server-sent-events line parsed into a Piece (checked: wrong types and absurd counts
are never taken), and a server's error body in plain words."""

from __future__ import annotations

import json
import math
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


MAX_COUNT = 1 << 24  # tokens; a count above any context window is not believed
MAX_MS = 1e8  # about 28 hours; a longer time is not believed
_FIELDS = ("event:", "id:", "retry:")  # event-stream fields this side has no use for


@dataclass(frozen=True, slots=True)
class Piece:
    """What one SSE line carried: text, the finish reason, the usage/timings accounting, an error
    the server reported, or why the line is not what an OpenAI-compatible stream sends (`bad`)."""

    delta: str = ""
    finish_reason: str = ""
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    completion_tokens: int | None = None
    prompt_ms: float | None = None
    decode_ms: float | None = None
    error: str = ""
    done: bool = False  # the [DONE] sentinel
    bad: str = ""


def parse_line(line: str) -> Piece | None:
    """One line of the event stream; None for blank lines, comments and fields we do not use.
    Never raises: a line of the wrong kind is a Piece whose `bad` says what is wrong with it."""
    line = line.strip()
    if line.startswith("data:"):
        data = line[5:].strip()
    elif line.startswith("error:"):  # llama.cpp sends a failure mid-stream as its own event
        data = line[6:].strip()
    elif not line or line.startswith(":") or line.startswith(_FIELDS):
        return None
    else:
        return Piece(bad=f"it is not an event stream: it sent {_shown(line)}")
    if data == "[DONE]":
        return Piece(done=True)
    try:
        obj = json.loads(data)
    except ValueError:
        return Piece(bad=f"it sent something that is not JSON: {_shown(data)}")
    if isinstance(obj, dict) and ("error" in obj or line.startswith("error:")):
        return Piece(error=error_text(obj))
    if not isinstance(obj, dict):
        return Piece(bad=f"it sent {_shown(data)} where a chunk of the reply belongs")
    try:
        return _piece(obj)
    except (TypeError, ValueError) as exc:
        return Piece(bad=str(exc))


def _piece(obj: dict) -> Piece:
    choices = _of(obj, "choices", list, [])
    choice = choices[0] if choices else {}
    if not isinstance(choice, dict):
        raise TypeError(f"a choice is {_shown(choice)}, not an object")
    delta = _of(choice, "delta", dict, {})
    content = _of(delta, "content", str, "")
    usage, timings = _of(obj, "usage", dict, {}), _of(obj, "timings", dict, {})
    details = _of(usage, "prompt_tokens_details", dict, {})
    cached = _count(details.get("cached_tokens"))
    if cached is None:
        cached = _count(timings.get("cache_n"))
    prompt = _count(usage.get("prompt_tokens"))
    computed = _count(timings.get("prompt_n"))
    if prompt is None and computed is not None:  # llama.cpp's own accounting: computed + reused
        prompt = _count(computed + (_count(timings.get("cache_n")) or 0))
    return Piece(
        delta=content,
        finish_reason=_of(choice, "finish_reason", str, "")[:40],
        prompt_tokens=prompt,
        cached_tokens=cached,
        completion_tokens=_count(usage.get("completion_tokens")),
        prompt_ms=_ms(timings.get("prompt_ms")),
        decode_ms=_ms(timings.get("predicted_ms")),
    )


def _of(obj: dict, key: str, kind: type, default: Any) -> Any:
    """obj[key] when it is a `kind` (null or missing: `default`); another type raises TypeError."""
    value = obj.get(key)
    if value is None:
        return default
    if not isinstance(value, kind):
        raise TypeError(f'its "{key}" is {_shown(value)}, not {"text" if kind is str else "a list" if kind is list else "an object"}')
    return value


def _shown(text: Any) -> str:
    text = text if isinstance(text, str) else repr(text)
    return repr(text if len(text) <= 60 else text[:57] + "…")


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


def _count(value: Any) -> int | None:
    """A token count as a whole number from 0 to MAX_COUNT; None for anything else (not believed)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return None
    return int(value) if 0 <= value <= MAX_COUNT else None


def _ms(value: Any) -> float | None:
    """A time in milliseconds from 0 to MAX_MS; None for anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and 0 <= value <= MAX_MS else None
