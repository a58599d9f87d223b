"""Chat templating and tokenisation at the edge of a worker: messages → token ids.

A conversation's canonical ids are the concatenation of each message's own rendered chunk,
tokenised alone. Both the cached and the uncached path build ids this way, so they agree by
construction, and a slot can reuse ids up to any message boundary without re-tokenising.

A chunk is rendered after a short context (the first message and the one or two before it),
so templating a conversation costs time linear in its length, and each chunk's ids are kept
(chunks.ChunkMemo): a new turn tokenises only its new messages. Whether the chunks add up to
the template's own rendering is checked once per conversation; where they do not, the whole
rendering is tokenised as one piece (message boundaries then unprovable). Message text is
tokenised as text: control tokens in it are not the template's markers (chunks.ControlTokens).

A reply the model generated is the exception: its ids as generated are its chunk where they spell
its text exactly (encode_reply), since the KV holds them and the same text tokenised again often
gives other ids (at paragraph and list breaks). The memo keeps that chunk, so every encoding of a
conversation that holds the reply unchanged reads it as generated; an edited text is another key.

With a vision model (`vision`, model/vision.py) message content is rendered as parts (images
first, then the text) and each image token the template writes is expanded into the image's run
of placeholder positions, all holding the image's key (model/images.py): a chunk's ids then say
which image each KV position holds. Without one, a message with images is refused."""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Hashable, Sequence

from desktop.errors import InvalidRequest, ModelLoadError
from desktop.model.chunks import Chunk, ChunkMemo, ControlTokens
from desktop.model.images import NO_IMAGES
from desktop.model.messages import Message, prefix_hashes
from desktop.model.tiny import CHATML_TEMPLATE
from desktop.model.tool_render import renders_tools, with_tools


_SENTINEL = "\u2063OMNIDESK\u2063"
_PROBES = (  # small conversations on which the short-context chunks must equal the exact ones
    ("system", "user", "assistant", "user", "assistant", "user"),
    ("user", "assistant", "user", "assistant", "user"),
)


@dataclass(frozen=True, slots=True)
class Encoded:
    """Token ids of a message list; bounds[k] is the id count after message k (None if the
    template is not append-only and so message boundaries are unprovable)."""

    ids: list[int]
    bounds: list[int] | None


class ChatTemplate:
    """Renders messages with the tokenizer's chat template and tokenises them in chunks."""

    def __init__(self, tokenizer, memo: ChunkMemo | None = None, vision=None) -> None:
        self.tokenizer, self.vision = tokenizer, vision
        if not getattr(tokenizer, "chat_template", None):
            tokenizer.chat_template = CHATML_TEMPLATE  # base models: fall back to ChatML
        self.control = ControlTokens(tokenizer)
        self.memo = memo or ChunkMemo()
        self.eos_ids = self._eos_ids()
        self.native_tools = renders_tools(tokenizer)  # else: a Hermes tools block (tool_render.py)
        probe = [Message("user", "x")]
        self.gen_prompt = self.render(probe, add_generation_prompt=True)[len(self.render(probe)) :]
        turn = self.delta_text(probe, [Message("assistant", _SENTINEL)])
        opening, sep, self.reply_close = turn.partition(_SENTINEL)
        if not sep:
            raise ModelLoadError("The model's chat template drops assistant messages; it cannot hold a chat.")
        self.gen_prompt_ids = self.tokenize(self.gen_prompt)
        self.reply_close_ids = self.tokenize(self.reply_close)
        self.local = self._probe_local()

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

    # ------------------------------------------------------------------ rendering

    def render(self, messages: Sequence[Message], add_generation_prompt: bool = False, marked: bool = False) -> str:
        """The template's text for the messages; `marked`: control tokens in their text marked."""
        if not messages:
            return ""
        mark = self.control.mark if marked else str
        if self.vision is None:
            if any(m.images for m in messages):
                raise InvalidRequest(NO_IMAGES)
            dicts = [{"role": m.role, "content": mark(m.content)} for m in messages]
        else:  # vision templates take content as parts
            dicts = [{"role": m.role, "content": [{"type": "image"} for _ in m.images] + [{"type": "text", "text": mark(m.content)}]}
                     for m in messages]
        dicts, tools = with_tools(messages, dicts, self.native_tools)
        try:
            return self.tokenizer.apply_chat_template(
                dicts, tools=tools, tokenize=False, add_generation_prompt=add_generation_prompt
            )
        except Exception as exc:  # jinja raises its own exceptions for role order rules etc.
            raise InvalidRequest(f"The model's chat template refused these messages: {exc}") from exc

    def tokenize(self, text: str) -> list[int]:
        """Ids of template text (its markers are control tokens); message text goes through chunks."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []

    def delta_text(self, history: Sequence[Message], delta: Sequence[Message], marked: bool = False) -> str:
        """Text that `delta` adds after `history`; raises ValueError if the template is not append-only."""
        before = self.render(history, marked=marked)
        after = self.render(list(history) + list(delta), marked=marked)
        if not after.startswith(before):
            raise ValueError("chat template is not append-only")
        return after[len(before) :]

    # ------------------------------------------------------------------ chunks

    def _context(self, msgs: Sequence[Message], k: int, hashes: list[bytes]) -> tuple[Hashable, Sequence[Message]]:
        """The messages message k is rendered after, and their memo key. Short context: the first
        message (templates treat it apart) and the one or two before k, so that k keeps its index
        parity (templates that check turn order); exact context (templates that fail the probe):
        all of msgs[:k], keyed by its chain hash."""
        if not self.local:
            return (hashes[k - 1] if k else b""), msgs[:k]
        if k <= 2:
            ctx = tuple(msgs[:k])
        else:
            ctx = (msgs[0], msgs[k - 1]) if k % 2 == 0 else (msgs[0], msgs[k - 2], msgs[k - 1])
        return ctx, ctx

    def _key(self, msgs: Sequence[Message], k: int, hashes: list[bytes]) -> tuple[Hashable, Sequence[Message]]:
        """Message k's memo key and the context it is rendered after."""
        key, ctx = self._context(msgs, k, hashes)
        return (_light(key), _light(msgs[k])), ctx  # images by their hash: the memo never holds image bytes

    def _chunk(self, msgs: Sequence[Message], k: int, hashes: list[bytes]) -> Chunk:
        key, ctx = self._key(msgs, k, hashes)
        chunk = self.memo.get(key)
        if chunk is None:
            msg = msgs[k]
            text = self.delta_text(ctx, [msg], marked=True)
            ids = self.memo.reply(msg.content) if msg.role == "assistant" and not msg.images else None
            if ids is None or text != self.gen_prompt + msg.content + self.reply_close:
                ids = array("q", self._ids(text, msg.images))  # a reply generated here reads as generated
            chunk = self.memo.put(key, Chunk(text, ids))
        return chunk

    def _ids(self, text: str, images: Sequence) -> list[int]:
        """Ids of rendered text; with images, each image token expanded to the image's positions."""
        ids = self.control.encode(text)
        return self.vision.expand(ids, images) if images else ids

    def _chunks(self, msgs: Sequence[Message], start: int, hashes: list[bytes]) -> list[Chunk]:
        return [self._chunk(msgs, k, hashes) for k in range(start, len(msgs))]

    def _faithful(self, msgs: Sequence[Message], hashes: list[bytes], chunks: list[Chunk] | None = None) -> bool:
        """Whether the chunks of `msgs` add up to the template's own rendering of them (kept)."""
        verdict = self.memo.verdict(hashes[-1])
        if verdict is None:
            try:
                chunks = chunks if chunks is not None else self._chunks(msgs, 0, hashes)
                verdict = "".join(c.text for c in chunks) == self.render(msgs, marked=True)
            except ValueError:
                verdict = False
            self.memo.set_verdict(hashes[-1], verdict)
        return verdict

    def _whole(self, msgs: Sequence[Message], hashes: list[bytes]) -> list[int]:
        """Ids of the whole rendering in one piece (templates whose chunks are unprovable)."""
        key = (b"whole", hashes[-1])
        chunk = self.memo.get(key)
        if chunk is None:
            images = [image for m in msgs for image in m.images]
            chunk = Chunk("", array("q", self._ids(self.render(msgs, marked=True), images)))
            self.memo.put(key, chunk)
        return list(chunk.ids)

    # ------------------------------------------------------------------ encoding

    def encode(self, messages: Sequence[Message]) -> Encoded:
        """Canonical ids of the messages (no generation prompt), chunk by chunk."""
        if not messages:
            return Encoded([], [])
        hashes = prefix_hashes(messages)
        try:
            chunks = self._chunks(messages, 0, hashes)
        except ValueError:
            chunks = None
        if chunks is None or not self._faithful(messages, hashes, chunks):
            return Encoded(self._whole(messages, hashes), None)
        return _joined(chunks)

    def encode_delta(self, history: Sequence[Message], delta: Sequence[Message], verify: bool = True) -> Encoded:
        """Canonical ids of `delta` following `history`, chunk by chunk as `encode` does; bounds are
        relative to the start of the delta. Raises ValueError where `encode(history + delta)`
        could not use chunks. `verify=False` skips that check (a reply being recorded: the next
        request that builds on it is checked then)."""
        msgs = list(history) + list(delta)
        if not msgs:
            return Encoded([], [])
        hashes = prefix_hashes(msgs)
        chunks = self._chunks(msgs, len(history), hashes)
        if verify and not self._faithful(msgs, hashes):
            raise ValueError("the chat template renders this conversation differently message by message")
        return _joined(chunks)

    def encode_reply(self, history: Sequence[Message], reply: Message, generated: Sequence[int]) -> list[int]:
        """Canonical ids of `reply`, the assistant message whose text the model generated as
        `generated` after `history` and the reply prompt. Where those ids provably spell the
        message as the template renders it there (`_spelled`), they are its ids — the reply prompt,
        the generated ids, the close (close_after_reply) — and the memo keeps them as its chunk, so
        every later encoding of this conversation reads the reply as the KV holds it; otherwise
        (an edited text, a stop string or a limit that cut it, a template that renders a reply
        otherwise) its text tokenised, as `encode_delta(history, [reply], verify=False)`."""
        msgs = list(history) + [reply]
        hashes = prefix_hashes(msgs)
        key, ctx = self._key(msgs, len(history), hashes)
        ids = self.gen_prompt_ids + list(generated) + self.close_after_reply(generated)
        text = self._spelled(ctx, reply, generated, ids)
        kept = self.memo.get(key)
        if text is None or (kept is not None and kept.text == text):
            # not provable, or this text here already has its ids (another generation of the same
            # text, e.g. bytes cut short that decode alike): the first ids stay its canonical ones,
            # so every encoding of it agrees; this slot's KV then diverges inside it and is cropped
            return list(self._chunk(msgs, len(history), hashes).ids)
        self.memo.seed(key, Chunk(text, array("q", ids)))
        self.memo.keep_reply(reply.content, array("q", ids))
        return ids

    def _spelled(self, ctx: Sequence[Message], reply: Message, generated: Sequence[int], ids: list[int]) -> str | None:
        """The reply's rendered chunk where `ids` spell it exactly, else None. Exact text equality
        only: the generated ids (less a final end-of-turn id) decode to the reply's text, the
        template renders the reply here as reply prompt + text + close, and all of `ids` decode to
        that rendering. (Bytes of a character cut short decode to U+FFFD in the text as in the
        check: the KV holds those bytes, and the text that came from them stands for them.)"""
        content = list(generated[:-1]) if generated and generated[-1] in self.eos_ids else list(generated)
        text = reply.content
        if not content or reply.images or self._decode(content) != text:
            return None
        chunk = self.delta_text(ctx, [reply], marked=True)  # marked: text with control tokens never matches
        if chunk != self.gen_prompt + text + self.reply_close or self._decode(ids) != chunk:
            return None
        return chunk

    def _decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)

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

    def _probe_local(self) -> bool:
        """Whether short-context chunks equal the exact ones (message k after all of msgs[:k]) on a
        few small conversations; if not, chunks use the exact context (quadratic, still correct)."""
        tried = 0
        for roles in _PROBES:
            msgs = [Message(role, f"{role} {i} text") for i, role in enumerate(roles)]
            try:
                exact = [self.delta_text(msgs[:k], [msgs[k]], marked=True) for k in range(len(msgs))]
            except (ValueError, InvalidRequest):  # the template refuses this shape, or is not append-only
                continue
            self.local = True
            try:
                local = [self.delta_text(self._context(msgs, k, [])[1], [msgs[k]], marked=True) for k in range(len(msgs))]
            except (ValueError, InvalidRequest):  # refuses a shortened context: keep the exact one
                return False
            if local != exact:
                return False
            tried += 1
        return tried > 0


def _light(key: Hashable) -> Hashable:
    """A memo key with each message that has images replaced by (role, text, image hashes)."""
    if isinstance(key, Message):
        return (key.role, key.content, tuple(i.sha256 for i in key.images)) if key.images else key
    if isinstance(key, tuple):
        return tuple(_light(k) for k in key)
    return key


def _joined(chunks: list[Chunk]) -> Encoded:
    ids: list[int] = []
    bounds: list[int] = []
    for chunk in chunks:
        ids.extend(chunk.ids)
        bounds.append(len(ids))
    return Encoded(ids, bounds)
