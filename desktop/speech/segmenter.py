"""Where a streaming reply is cut into pieces for speech: sentence/clause boundaries, token caps,
the first clause alone and a flush timer. Pure — no threads; the caller passes the time in."""

from __future__ import annotations

import re
from dataclasses import dataclass

# Tokens are approximated by words: this stage has no tokenizer, and what matters for speech is
# how much text waits, not the LLM's token count. A token is a run of non-space characters, or
# one CJK character (those scripts put no spaces between words).
_CJK = "\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"
_TOKEN = re.compile(rf"[{_CJK}]|[^\s{_CJK}]+")
_CJK_CHAR = re.compile(rf"[{_CJK}]")
_CLOSERS = "\"'”’)\\]」』"
# Sentence ends need a following space (so "3.5" or "file.txt" never split); CJK ends do not.
_SENTENCE = re.compile(rf"[.!?…]+[{_CLOSERS}]*(?=\s)|[。！？]+[{_CLOSERS}]*|\n")
_CLAUSE = re.compile(rf"[,;:][{_CLOSERS}]*(?=\s)|—|(?<=\s)[-–](?=\s)|[，；：、]")
_ABBREVIATIONS = frozenset("mr mrs ms dr prof sr jr st vs etc no fig approx".split())

_FENCE = re.compile(r"```[^\s`]*")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_LINE_MARK = re.compile(r"(?m)^[ \t]*(?:#{1,6}|[-+*]|>)[ \t]+")
_EMPHASIS = re.compile(r"\*+|__+|~~|`")


@dataclass(frozen=True, slots=True)
class SegmenterConfig:
    """When pending text is flushed to the TTS. Token counts are word counts (see above).

    window_size: 1 = stream one sentence per segment; N > 1 = N sentences per segment after the
    first (which is always alone, for a fast first sound); -1 = the whole reply at is_last only."""

    first_window_tokens: int = 6  # the first segment is cut by this many words at the latest
    first_min_tokens: int = 3  # ...and has at least this many (no uselessly tiny first sound)
    first_clause: bool = True  # the first segment ends at its first clause boundary (, ; : —)
    max_segment_tokens: int = 40  # never wait longer than this many tokens to flush
    min_flush_interval_ms: float = 600  # flush complete words if no boundary came this long after the last flush
    window_size: int = 1

    def __post_init__(self) -> None:
        if self.first_window_tokens < 1:
            raise ValueError(f"first_window_tokens must be at least 1, not {self.first_window_tokens}")
        if self.first_min_tokens < 1:
            raise ValueError(f"first_min_tokens must be at least 1, not {self.first_min_tokens}")
        if self.max_segment_tokens < self.first_window_tokens:
            raise ValueError(f"max_segment_tokens ({self.max_segment_tokens}) must be at least "
                             f"first_window_tokens ({self.first_window_tokens})")
        if not self.min_flush_interval_ms > 0:
            raise ValueError(f"min_flush_interval_ms must be positive, not {self.min_flush_interval_ms}")
        if self.window_size != -1 and self.window_size < 1:
            raise ValueError(f"window_size must be -1 (whole reply) or at least 1, not {self.window_size}")


def count_words(text: str) -> int:
    """Words in `text` as this stage counts them (a CJK character is one)."""
    return len(_TOKEN.findall(text))


def speakable(text: str) -> str:
    """`text` without markdown noise (code fences, emphasis, bullets, headings, link targets) and
    with whitespace collapsed: what the TTS should say."""
    text = _FENCE.sub(" ", text)
    text = _LINK.sub(r"\1", text)
    text = _LINE_MARK.sub("", text)
    text = _EMPHASIS.sub("", text)
    return " ".join(text.split())


def _is_abbreviation(text: str, dot: int) -> bool:
    """Whether the '.' at `dot` ends an abbreviation, an initial or a list number, not a sentence."""
    start = dot
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    word = text[start:dot].lstrip("(\"'“‘").lower()
    line_start = start == 0 or text[start - 1] == "\n"
    return bool(word) and (word in _ABBREVIATIONS or "." in word or (len(word) == 1 and word.isalpha())
                           or (word.isdigit() and line_start))


def _sentence_ends(text: str) -> list[int]:
    ends: list[int] = []
    for m in _SENTENCE.finditer(text):
        if m.group().rstrip(_CLOSERS) == "." and _is_abbreviation(text, m.start()):
            continue
        if not text[ends[-1] if ends else 0:m.start()].strip() and (ends or m.group() == "\n"):
            continue  # "Hi.\n" or a blank line: one boundary, not two
        ends.append(m.end())
    return ends


class Segmenter:
    """Cuts one request's streaming text into speakable pieces.

    `push(text, now)` and `poll(now)` return the pieces that became ready; `finish()` returns the
    rest at is_last (its last element is the final piece, possibly ""). A cut is made, whichever
    comes first, at: a sentence end (`window_size` of them after the first segment); the token cap
    (`first_window_tokens` for the first segment, else `max_segment_tokens`), where it goes back to
    the last clause or sentence boundary before the cap if there is one; or, `min_flush_interval_ms`
    after the last flush, after the last complete word. A cut never falls inside a word: the word
    at the end of the text may still grow, so it is complete only once whitespace follows.

    The first segment is the reply's first clause, so that its sound starts at once: it ends at
    the first clause or sentence boundary (`first_clause`), or at `first_window_tokens` words,
    whichever comes first, and never before `first_min_tokens` words (a 1–2 word piece such as
    "Sure," says little and leaves no time to synthesise what follows), except at the reply's end."""

    def __init__(self, config: SegmenterConfig, now: float) -> None:
        self.config = config
        self._buf = ""
        self._first = True
        self._last_flush = now
        self._interval = config.min_flush_interval_ms / 1000
        self._whole = config.window_size == -1
        self._first_min = min(config.first_min_tokens, config.first_window_tokens)

    @property
    def pending(self) -> str:
        """Text received but not yet cut into a piece."""
        return self._buf

    def push(self, text: str, now: float) -> list[str]:
        self._buf = (self._buf + text).lstrip() if not self._whole else self._buf + text
        if self._whole:
            return []
        return self._cuts(now, final=False) + self.poll(now)

    def poll(self, now: float) -> list[str]:
        """The flush timer: everything up to the last complete word, if the interval has passed."""
        if self._whole or now < self._last_flush + self._interval:
            return []
        ends = self._complete_token_ends(final=False)
        if self._first and len(ends) < self._first_min:
            return []
        return self._take(ends[-1], now) if ends else []

    def deadline(self) -> float | None:
        """When `poll` would flush the pending text, or None if there is nothing it could flush."""
        ends = self._complete_token_ends(final=False)
        if self._whole or not ends or (self._first and len(ends) < self._first_min):
            return None
        return self._last_flush + self._interval

    def finish(self) -> list[str]:
        """The rest of the reply (is_last); the last element is the final piece and may be ""."""
        if self._whole:
            rest, self._buf = self._buf, ""
            return [speakable(rest)]
        out = self._cuts(self._last_flush, final=True)
        rest, self._buf = self._buf, ""
        return out + [speakable(rest)]

    # ------------------------------------------------------------------ cutting

    def _cuts(self, now: float, *, final: bool) -> list[str]:
        out: list[str] = []
        while (cut := self._next_cut(final)) is not None:
            if final and not self._buf[cut:].strip():
                break  # what is left is the final piece, returned by finish()
            out += self._take(cut, now)
        return out

    def _take(self, cut: int, now: float) -> list[str]:
        piece = speakable(self._buf[:cut])
        self._buf = self._buf[cut:].lstrip()
        self._last_flush = now
        if piece:
            self._first = False
        return [piece] if piece else []

    def _complete_token_ends(self, *, final: bool) -> list[int]:
        buf = self._buf
        return [m.end() for m in _TOKEN.finditer(buf)
                if final or m.end() < len(buf) or _CJK_CHAR.fullmatch(m.group())]

    def _next_cut(self, final: bool) -> int | None:
        buf = self._buf
        scan = buf + " " if final else buf  # at is_last, the end of the text is a word end
        sentences = [e for e in _sentence_ends(scan) if e <= len(buf)]
        tokens = self._complete_token_ends(final=final)
        if self._first:
            return self._first_cut(scan, sentences, tokens)
        need = self.config.window_size
        candidates = [sentences[need - 1]] if len(sentences) >= need else []
        limit = self.config.max_segment_tokens
        if len(tokens) >= limit:
            cap = tokens[limit - 1]
            soft = [e for e in sentences + self._clauses(scan) if e <= cap and buf[:e].strip()]
            candidates.append(max(soft, default=cap))
        return min(candidates, default=None)

    def _first_cut(self, scan: str, sentences: list[int], tokens: list[int]) -> int | None:
        """The first segment's end: its first boundary (a sentence end, or with `first_clause` a
        clause) after at least `first_min_tokens` words, else the cap at `first_window_tokens`
        words, where it goes back to the last such boundary before the cap."""
        bounds = sorted(e for e in sentences + (self._clauses(scan) if self.config.first_clause else [])
                        if self._words_before(e) >= self._first_min)
        limit = self.config.first_window_tokens
        candidates = bounds[:1]
        if len(tokens) >= limit:
            cap = tokens[limit - 1]
            soft = [e for e in bounds + self._clauses(scan) if e <= cap and self._words_before(e) >= self._first_min]
            # Not back to a short sentence ("Yes."): what follows it would be a whole sentence,
            # not ready before "Yes." has been said (measured: gaps of 1.1-1.6 s). Piper still
            # says "Yes." first, as the segment's first chunk.
            candidates.append(max(soft, default=cap))
        return min(candidates, default=None)

    def _clauses(self, scan: str) -> list[int]:
        return [m.end() for m in _CLAUSE.finditer(scan) if m.end() <= len(self._buf)]

    def _words_before(self, end: int) -> int:
        return count_words(self._buf[:end])
