"""Words that leave a spoken sentence open: a turn whose transcript ends on one of them ("…and",
"so", "um", "I would like to") is not over, whatever its intonation says. The end-of-turn model
hears prosody only, and a hesitation spoken with a falling tone (common in synthetic and in
careful speech) sounds finished to it; the words say otherwise."""

from __future__ import annotations

import re

# Conjunctions, fillers, articles, possessives and "to"/"of": an English turn does not end on
# them. Words that often end a question or a short answer ("about", "for", "like", "you", "is",
# "can", "would", "this") are left out: a missed question is worse than a late answer to a
# hesitation (the silence fallback ends those). "so" ends "I think so" and its kin.
OPEN_WORDS = frozenset("""
and or but so because although though unless whereas if than then
um uh er erm ehm hmm mm
the a an my your our their its
to of
i i'm i'd i'll it's
""".split())
CLOSED_SO = frozenset("think hope guess believe suppose said say do did not even".split())
# Phrases that want an object: "I would like to know …", "can you tell me …".
OPEN_PHRASES = ("like to know", "want to know", "wanted to know", "tell me", "i would like", "i'd like",
                "wondering if", "wondering whether")

_WORD = re.compile(r"[a-z']+")


def leaves_open(text: str) -> bool:
    """Whether the transcript ends mid-sentence: on an open word, or trailing off ("…", "-")."""
    stripped = text.strip()
    if not stripped:
        return False
    if stripped.endswith(("...", "…", "-", "—")):
        return True
    words = _WORD.findall(stripped.lower().replace("’", "'"))
    if not words:
        return False
    if " ".join(words[-3:]).endswith(OPEN_PHRASES):
        return True
    if words[-1] not in OPEN_WORDS:
        return False
    return not (words[-1] == "so" and len(words) > 1 and words[-2] in CLOSED_SO)


def asks_question(text: str) -> bool:
    """Whether the transcript is a finished question: it ends with "?" and not on an open word
    (a question ends the turn even where its intonation left the end-of-turn model unsure)."""
    return text.strip().endswith("?") and not leaves_open(text)
