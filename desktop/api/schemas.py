"""The JSON of OpenAI's chat completions API: the request as clients send it (checked, then turned
into the gateway's messages and SamplingParams) and the completion, chunk and usage objects."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pydantic import BaseModel, ConfigDict

from desktop.api.errors import ApiError
from desktop.errors import InvalidRequest
from desktop.model.params import MAX_TOKENS, SamplingParams
from desktop.protocol import TokenStats

IMAGE_PARTS = ("image_url", "input_image", "image")
UNSUPPORTED_ROLES = ("function",)  # the old function-calling role; tools use "tool"
TOOL_KEYS = ("tool_calls", "tool_call_id", "name")


class ChatRequest(BaseModel):
    """The fields we act on; others that clients commonly send (user, metadata, …) are ignored.
    Ranges are checked by SamplingParams, whose messages name the field."""

    model_config = ConfigDict(extra="allow")

    model: str | None = None
    messages: list[dict[str, Any]]
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    stop: str | list[str] | None = None
    seed: int | None = None
    n: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    logprobs: bool | None = None
    tools: Any = None  # checked by api/tooling.py, whose errors name the field
    tool_choice: Any = None
    parallel_tool_calls: Any = None
    response_format: Any = None
    truncation: str | None = None  # OpenAI Responses' word: "auto" (default here: the oldest messages slide out) or "disabled"

    def refuse_unsupported(self) -> None:
        """400 for what this server cannot do, rather than silently doing something else."""
        if self.n not in (None, 1):
            raise ApiError(400, "Only one choice per request is supported: n must be 1.", param="n")
        if self.logprobs:
            raise ApiError(400, "logprobs are not supported by this server.", param="logprobs")
        for name in ("presence_penalty", "frequency_penalty"):
            if getattr(self, name):
                raise ApiError(400, f"{name} is not supported (only 0); the app's repetition penalty applies.",
                               param=name)
        if self.truncation not in (None, "auto", "disabled"):
            raise ApiError(400, 'truncation must be "auto" (the oldest messages leave the model\'s view when the '
                           'conversation is longer than its window) or "disabled" (an error instead).', param="truncation")

    def overflow(self) -> str:
        """Past the model's window: slide (the default) unless the request says "disabled"."""
        return "error" if self.truncation == "disabled" else "slide"

    def params(self, defaults: SamplingParams, context: int = 0) -> SamplingParams:
        """The app's sampling defaults, overridden by what the request sets. `context`: the model's
        context window in tokens (0: not known); a reply asked longer than it is refused, as
        OpenAI refuses one (context_length_exceeded)."""
        changes: dict[str, Any] = {}
        if self.temperature is not None:
            changes["temperature"] = self.temperature
        if self.top_p is not None:
            changes["top_p"] = self.top_p
        name = "max_completion_tokens" if self.max_completion_tokens is not None else "max_tokens"
        limit = getattr(self, name)
        if limit is not None:
            if not 1 <= limit <= MAX_TOKENS:
                raise ApiError(400, f"{name} must be between 1 and {MAX_TOKENS} (got {limit}).", param=name)
            if context and limit > context:
                raise ApiError(400, f"{name} is {limit:,}, more than the model's context window of {context:,} tokens "
                               "(the prompt and the reply share it); ask for fewer.", param=name,
                               code="context_length_exceeded")
            changes["max_tokens"] = limit
        if self.stop is not None:
            changes["stop"] = (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)
        if self.seed is not None:
            changes["seed"] = self.seed
        try:
            return replace(defaults, **changes)  # SamplingParams checks every value
        except InvalidRequest as exc:  # its message starts with the field's name
            param = next((n for n in changes if exc.message.startswith(n + " ")), None)
            raise ApiError(400, exc.message, param=param) from None

    def chat_messages(self, supports_images: bool, model: str) -> list[dict[str, Any]]:
        """Messages for gateway.chat: "developer" is a system message; images only for a vision model."""
        out = []
        for i, m in enumerate(self.messages):
            role, content = m.get("role"), m.get("content")
            if role in UNSUPPORTED_ROLES:
                raise ApiError(400, f"Message {i + 1}: {role} messages are not supported; use tools and "
                               "tool messages.", param=f"messages[{i}].role")
            if role == "developer":
                role = "system"
            if content is None and role == "assistant":
                content = ""
            if isinstance(content, list) and not supports_images:
                kinds = [p.get("type") for p in content if isinstance(p, dict)]
                if any(k in IMAGE_PARTS for k in kinds):
                    raise ApiError(400, f"Message {i + 1} contains an image, but the current model ({model}) "
                                   "reads text only. Choose a vision model in Omnidesk's settings, or send text.",
                                   param=f"messages[{i}].content", code="image_not_supported")
            out.append({**{k: m[k] for k in TOOL_KEYS if m.get(k) is not None}, "role": role, "content": content})
        return out


def usage(stats: TokenStats) -> dict[str, Any]:
    """Token counts as OpenAI reports them: cached prompt tokens under prompt_tokens_details."""
    return {"prompt_tokens": stats.input_tokens, "completion_tokens": stats.generated_tokens,
            "total_tokens": stats.input_tokens + stats.generated_tokens,
            "prompt_tokens_details": {"cached_tokens": stats.cached_tokens}}


def finish(stats: TokenStats) -> str:
    return "length" if stats.finish_reason in ("length", "window") else "stop"  # OpenAI: either limit


def completion(cid: str, model: str, created: int, text: str, stats: TokenStats) -> dict[str, Any]:
    return {"id": cid, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "logprobs": None, "finish_reason": finish(stats)}],
            "usage": usage(stats)}


def chunk(cid: str, model: str, created: int, delta: dict[str, Any], finish_reason: str | None = None,
          usage_: dict[str, Any] | None = None, *, choices: bool = True) -> dict[str, Any]:
    """One chat.completion.chunk; `choices=False` gives the final usage-only chunk (include_usage)."""
    body: dict[str, Any] = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                            "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                         "finish_reason": finish_reason}] if choices else []}
    if usage_ is not None or not choices:
        body["usage"] = usage_
    return body
