"""Word error rate of a transcript against the reference text, for the ASR tests and the call
benchmark: case and punctuation are ignored, words are aligned by Levenshtein distance."""

from __future__ import annotations

import re

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def words(text: str) -> list[str]:
    """Lower-case words, punctuation dropped ("Paris?" → "paris", "o'clock" stays)."""
    return _WORD.findall(text.lower().replace("’", "'"))


def word_error_rate(reference: str, hypothesis: str) -> float:
    """(substitutions + deletions + insertions) / reference words; 0.0 for two empty texts,
    1.0 for any hypothesis against an empty reference."""
    ref, hyp = words(reference), words(hypothesis)
    if not ref:
        return 0.0 if not hyp else 1.0
    prev = list(range(len(hyp) + 1))  # edit distance of ref[:0] to each prefix of hyp
    for i, r in enumerate(ref, 1):
        cur = [i]
        for j, h in enumerate(hyp, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h)))
        prev = cur
    return prev[-1] / len(ref)
