"""Chat templating and tokenisation at the edge of a worker: messages → token ids.

A conversation's canonical ids are the concatenation of each message's own rendered chunk,
tokenised alone. Both the cached and the uncached path build ids this way, so they agree by
construction, and a slot can reuse ids up to any message boundary without re-tokenising."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from desktop.errors import InvalidRequest, ModelLoadError
from desktop.model.messages import Message
from desktop.model.tiny import CHATML_TEMPLATE

_SENTINEL = "\u2063OMNIDESK\u2063"


@dataclass(frozen=True, slots=True)
class Encoded:
    """Token ids of a message list; bounds[k] is the id count after message k (None if the
    template is not append-only and so message boundaries are unprovable)."""

    ids: list[int]
    bounds: list[int] | None


class ChatTemplate:
    """Renders messages with the tokenizer's chat template and tokenises them in chunks."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        if not getattr(tokenizer, "chat_template", None):
            tokenizer.chat_template = CHATML_TEMPLATE  # base models: fall back to ChatML
        self.eos_ids = self._eos_ids()
        probe = [Message("user", "x")]
        self.gen_prompt = self.render(probe, add_generation_prompt=True)[len(self.render(probe)) :]
        turn = self.delta_text(probe, [Message("assistant", _SENTINEL)])
        opening, sep, self.reply_close = turn.partition(_SENTINEL)
        if not sep:
            raise ModelLoadError("The model's chat template drops assistant messages; it cannot hold a chat.")
        self.gen_prompt_ids = self.tokenize(self.gen_prompt)
        self.reply_close_ids = self.tokenize(self.reply_close)

    def _eos_ids(self) -> frozenset[int]:
        ids = set()
        if self.tokenizer.eos_token_id is not None:
            ids.add(int(self.tokenizer.eos_token_id))
        for name in ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|endoftext|>"):
            tid = self.tokenizer.convert_tokens_to_ids(name)
            if isinstance(tid, int) and tid != self.tokenizer.unk_token_id and tid is not None:
                if name != "<|endoftext|>" or not ids:
                    ids.add(tid)
        return frozenset(ids)

    def render(self, messages: Sequence[Message], add_generation_prompt: bool = False) -> str:
        if not messages:
            return ""
        dicts = [{"role": m.role, "content": m.content} for m in messages]
        try:
            return self.tokenizer.apply_chat_template(
                dicts, tokenize=False, add_generation_prompt=add_generation_prompt
            )
        except Exception as exc:  # jinja raises its own exceptions for role order rules etc.
            raise InvalidRequest(f"The model's chat template refused these messages: {exc}") from exc

    def tokenize(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []

    def delta_text(self, history: Sequence[Message], delta: Sequence[Message]) -> str:
        """Text that `delta` adds after `history`; raises ValueError if the template is not append-only."""
        before = self.render(history)
        after = self.render(list(history) + list(delta))
        if not after.startswith(before):
            raise ValueError("chat template is not append-only")
        return after[len(before) :]

    def encode(self, messages: Sequence[Message]) -> Encoded:
        """Canonical ids of the messages (no generation prompt), chunk by chunk."""
        ids: list[int] = []
        bounds: list[int] = []
        try:
            for k in range(len(messages)):
                ids += self.tokenize(self.delta_text(messages[:k], messages[k : k + 1]))
                bounds.append(len(ids))
        except ValueError:
            return Encoded(self.tokenize(self.render(messages)), None)
        return Encoded(ids, bounds)

    def encode_delta(self, history: Sequence[Message], delta: Sequence[Message]) -> Encoded:
        """Canonical ids of `delta` following `history`, chunk by chunk as `encode` does; bounds are
        relative to the start of the delta. Raises ValueError if the template is not append-only."""
        ids: list[int] = []
        bounds: list[int] = []
        for k in range(len(delta)):
            ids += self.tokenize(self.delta_text(list(history) + list(delta[:k]), delta[k : k + 1]))
            bounds.append(len(ids))
        return Encoded(ids, bounds)

    def prompt_ids(self, messages: Sequence[Message]) -> list[int]:
        """Uncached reference: canonical ids of the messages plus the generation prompt."""
        return self.encode(messages).ids + self.gen_prompt_ids

    def close_after_reply(self, generated: Sequence[int]) -> list[int]:
        """Ids that end an assistant turn the way the template would, after the generated ids."""
        if generated and generated[-1] in self.eos_ids:
            eos_text = self.tokenizer.decode([generated[-1]], skip_special_tokens=False)
            if self.reply_close.startswith(eos_text):
                return self.tokenize(self.reply_close[len(eos_text) :])
        return self.reply_close_ids
