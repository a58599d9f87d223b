"""Constrained decoding with llguidance: a grammar (a string that crosses the process pipe in
SamplingParams) becomes a Constraint per reply, which masks the logits of each step to the tokens
the grammar allows and is advanced with the token sampled. At the grammar's end only the end of
turn is allowed, so the reply ends there.

llguidance was chosen over xgrammar and outlines-core: no torch dependency, and its mask on the
embedded model's 49k vocab costs tens of microseconds a token on this CPU (bench/agent.py
measures the decode rate with and without it: grammar_decode_ratio)."""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

if TYPE_CHECKING:  # torch is imported where a mask is made: the API's checks run in the window's process
    import torch

from desktop.errors import InvalidRequest

# Compact JSON (no free whitespace): a small model cannot wander into endless blank lines.
JSON_OPTIONS: dict[str, Any] = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
TOOL_OPEN, TOOL_CLOSE = "<tool_call>\n", "\n</tool_call>"


def json_grammar(schema: dict[str, Any] | bool) -> str:
    """The grammar of one JSON value matching `schema` (True: any JSON object)."""
    import llguidance

    if schema is True:
        schema = {"type": "object"}
    return llguidance.LLMatcher.grammar_from_json_schema(schema, defaults=JSON_OPTIONS)


def tool_call_schema(tools: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The schema of one call {"name", "arguments"} of any of `tools` (OpenAI function dicts:
    name, parameters)."""
    options = []
    for fn in tools:
        params = fn.get("parameters") or {"type": "object", "properties": {}}
        options.append({"type": "object", "properties": {"name": {"const": fn["name"]}, "arguments": params},
                        "required": ["name", "arguments"], "additionalProperties": False})
    return options[0] if len(options) == 1 else {"anyOf": options}


def tool_call_grammar(tools: Sequence[dict[str, Any]]) -> str:
    """A grammar for one Hermes-style tool call: `<tool_call>\\n{json}\\n</tool_call>` (the form
    tool_calls.parse reads, whatever the model's own format)."""
    import llguidance

    schema = json.dumps(tool_call_schema(tools), ensure_ascii=False)
    lark = (f"start: {json.dumps(TOOL_OPEN)} call {json.dumps(TOOL_CLOSE)}\n"
            f"call: %json {{ \"x-guidance\": {json.dumps(JSON_OPTIONS)}, \"allOf\": [{schema}] }}\n")
    return llguidance.LLMatcher.grammar_from_lark(lark)


def check(grammar: str) -> None:
    """Raise InvalidRequest (its message naming why) where llguidance cannot compile `grammar`."""
    import llguidance

    is_error, messages = llguidance.LLMatcher.validate_grammar_with_warnings(grammar)
    if is_error:
        raise InvalidRequest(f"The schema cannot be used for constrained decoding: {messages[0] if messages else 'invalid'}")


class Grammars:
    """Makes constraints for one tokenizer (its llguidance form is built once, ~1 s)."""

    def __init__(self, tokenizer: Any, eos_ids: Sequence[int]) -> None:
        self.tokenizer, self.eos_ids = tokenizer, sorted(eos_ids)
        self._ll = None
        self._lock = threading.Lock()

    def _tokenizer(self):
        with self._lock:
            if self._ll is None:
                import llguidance.hf

                eos = self.eos_ids or None
                self._ll = llguidance.hf.from_tokenizer(self.tokenizer, eos_token=eos)
            return self._ll

    def constraint(self, grammar: str) -> "Constraint":
        import llguidance

        matcher = llguidance.LLMatcher(self._tokenizer(), grammar, log_level=0)
        if matcher.is_error():
            raise InvalidRequest(f"The grammar cannot be used for constrained decoding: {matcher.get_error()}")
        return Constraint(matcher, self.eos_ids)


class Constraint:
    """One reply's matcher: mask(logits) before each pick, advance(token) after it."""

    def __init__(self, matcher: Any, eos_ids: Sequence[int]) -> None:
        self.matcher, self.eos_ids = matcher, list(eos_ids)

    def allowed(self, vocab: int) -> torch.Tensor:
        """A bool tensor [vocab]: the tokens the grammar allows next (at its end: the end of turn)."""
        import torch

        if self.matcher.is_stopped() or self.matcher.is_error():
            ok = torch.zeros(vocab, dtype=torch.bool)
            ok[[e for e in self.eos_ids if e < vocab]] = True
            return ok
        # numpy, single-threaded: torch's bit ops on 49k entries wait for a second thread on a
        # busy CPU (measured 0.2 ms alone, up to 70 ms under load)
        bits = np.unpackbits(np.frombuffer(self.matcher.compute_bitmask(), dtype=np.uint8), bitorder="little")
        ok = np.zeros(vocab, dtype=bool)
        n = min(vocab, bits.size)
        ok[:n] = bits[:n]
        return torch.from_numpy(ok)

    def mask(self, logits: torch.Tensor) -> torch.Tensor:
        """A copy of 1-D float logits with disallowed tokens at -inf."""
        import torch

        ok = self.allowed(logits.shape[-1])
        if logits.device.type == "cpu":
            x = logits.detach().float().numpy()
            return torch.from_numpy(np.where(ok.numpy(), x, np.float32(-np.inf)).astype(np.float32, copy=False))
        return logits.masked_fill(~ok.to(logits.device), float("-inf"))

    def advance(self, token: int) -> None:
        if not self.matcher.is_stopped():
            self.matcher.consume_token(token)

    @property
    def done(self) -> bool:
        return bool(self.matcher.is_stopped())
