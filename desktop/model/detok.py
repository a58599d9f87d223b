"""Streaming detokenisation: turns token ids into text pieces that never split a UTF-8
character, and stops exactly before the first stop string, holding back possible prefixes."""

from __future__ import annotations

from collections.abc import Sequence

_REPLACEMENT = "\ufffd"


class StreamDecoder:
    """Feeds token ids one at a time; returns the new text that is safe to show.

    Decoding is incremental (as in TGI/vLLM): the ids since `prefix` are decoded with and
    without the ids since `read`, and the difference is released once it no longer ends in
    U+FFFD, so each push costs O(window), not O(total). Both decodes start at the same token,
    which keeps tokenizers that strip a leading space (SentencePiece) consistent.

    Invariant: the concatenation of every piece returned by push() and finish() equals
    tokenizer.decode(all_ids, skip_special_tokens=...) cut before the first stop string to
    be completed (independent of how the text is split into tokens). With truly invalid byte
    sequences it can differ: byte-fallback decoders turn a whole invalid run into U+FFFD, so
    an earlier valid byte may already have been shown as itself.
    At finish(), bytes of an unfinished character are emitted as U+FFFD (as the full decode
    shows them) rather than dropped."""

    def __init__(
        self, tokenizer, stop: Sequence[str] = (), skip_special_tokens: bool = True
    ) -> None:
        if isinstance(stop, str):
            stop = (stop,)
        if any(not s for s in stop):
            raise ValueError("stop strings must not be empty")
        self.tokenizer = tokenizer
        self.stop = tuple(stop)
        self.skip_special_tokens = skip_special_tokens
        self.ids: list[int] = []
        self._prefix = 0  # start of the decode window (the ids of the last released piece)
        self._read = 0  # ids before this have been released as text
        self._prefix_text = ""  # decode(ids[_prefix:_read])
        self._held = ""  # decoded text held back: it may be the start of a stop string
        self._pieces: list[str] = []
        self._stopped = False
        self._finished = False

    @property
    def stopped(self) -> bool:
        """A stop string appeared; the text returned so far ends right before it and nothing
        after it is ever returned."""
        return self._stopped

    @property
    def text(self) -> str:
        """All text returned so far."""
        if len(self._pieces) > 1:
            self._pieces = ["".join(self._pieces)]
        return self._pieces[0] if self._pieces else ""

    def push(self, token_id: int) -> str:
        """Add one token; return the new complete text (may be ""). Ignored once stopped."""
        if self._finished:
            raise RuntimeError("push() after finish()")
        if self._stopped:
            return ""
        self.ids.append(token_id)
        new_text = self._decode(self.ids[self._prefix :])
        if len(new_text) <= len(self._prefix_text) or new_text.endswith(_REPLACEMENT):
            return ""  # nothing new yet, or the window ends inside a character
        delta = new_text[len(self._prefix_text) :]
        self._prefix, self._read = self._read, len(self.ids)
        self._prefix_text = self._decode(self.ids[self._prefix : self._read])
        return self._release(delta, final=False)

    def finish(self) -> str:
        """Flush everything held back; an unfinished trailing character comes out as U+FFFD."""
        if self._finished or self._stopped:
            self._finished = True
            return ""
        self._finished = True
        new_text = self._decode(self.ids[self._prefix :])
        return self._release(new_text[len(self._prefix_text) :], final=True)

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(
            ids, skip_special_tokens=self.skip_special_tokens, clean_up_tokenization_spaces=False
        )

    def _release(self, delta: str, final: bool) -> str:
        """Append `delta` to the held text; return what can be shown now."""
        buf = self._held + delta
        # The held text is the longest suffix that could start a stop string, so any stop
        # occurrence starts inside `buf`, never in text already returned. The stop that
        # completes first wins (ties: the longer one), as if the text came one char at a time.
        hits = [(i + len(s), i) for s in self.stop if (i := buf.find(s)) >= 0]
        if hits:
            self._stopped = True
            out, self._held = buf[: min(hits)[1]], ""
        else:
            keep = 0 if final else _stop_prefix_len(buf, self.stop)
            out, self._held = buf[: len(buf) - keep], buf[len(buf) - keep :]
        if out:
            self._pieces.append(out)
        return out


def _stop_prefix_len(text: str, stops: Sequence[str]) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of some stop string."""
    best = 0
    for s in stops:
        for k in range(min(len(s) - 1, len(text)), best, -1):
            if text.endswith(s[:k]):
                best = k
                break
    return best
