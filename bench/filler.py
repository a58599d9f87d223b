"""Text of about N tokens for the benches that need long conversations (bench/restart.py,
bench/long_chat.py): plain prose, and user requests that ask for paragraph breaks, lists and code.

Deterministic for a seed; counted with the model's own tokenizer sentence by sentence (a sum of
the parts, so "about": within a few tokens of the wish)."""

from __future__ import annotations

import re
from typing import Callable

Tokenize = Callable[[str], list[int]]
_ITEM = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s", re.M)  # a list item's line

TOPICS = (
    "a small vegetable garden", "a weekend trip by train", "a birthday dinner for eight", "a slow laptop",
    "learning to play the guitar", "a leaking kitchen tap", "a budget for the next month", "a reading list",
    "a python script that renames photos", "a morning running plan", "a bread recipe", "a job interview",
    "a flat move across town", "a noisy neighbour", "a history of the old harbour", "a chess opening",
)
FACTS = (
    "I have tried a few things already and none of them worked as well as I hoped.",
    "My budget is small, so cheap options matter more than perfect ones.",
    "I can spend about an hour on it every evening after work.",
    "Last time I asked a friend, but the advice was too vague to follow.",
    "I would like to understand why each step matters, not only what to do.",
    "The weather here is often rainy, which makes some plans harder.",
    "I keep notes in a text file, so plain text works best for me.",
    "There are two children at home who want to help with it.",
    "I read that the usual advice is outdated, and I am not sure what to believe.",
    "A simple answer I can check today is worth more than a long one I cannot use.",
)
SHAPES = (  # first in the message: the small default model follows an instruction it reads first
    "Write a numbered list of three tips for {topic}, then a short Python code block that prints them.",
    "Give me three tips for {topic} as a bulleted list, then a shell command in a code block.",
    "Explain {topic} in two short paragraphs separated by a blank line, then list three key points.",
    "Show a short Python code block about {topic}, then explain it as a numbered list.",
)
WORDS = (
    "the model keeps each conversation in memory so that a new turn only needs its own tokens and "
    "people ask about travel plans recipes code reviews gardening music history and small repairs while "
    "a careful answer explains the steps names the trade offs and ends with one clear suggestion"
).split()


def _count(tokenize: Tokenize, text: str) -> int:
    return len(tokenize(" " + text))


def prose(tokenize: Tokenize, tokens: int, seed: int) -> str:
    """Plain sentences of about `tokens` tokens (a long user message, a scripted reply)."""
    out, n, i = [], 0, seed
    while n < tokens:
        words = [WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(12)]
        sentence = " ".join(words).capitalize() + "."
        out.append(sentence)
        n += _count(tokenize, sentence)
        i += 1
    return " ".join(out)


def request(tokenize: Tokenize, tokens: int, turn: int) -> str:
    """A user message of about `tokens` tokens asking, in its own words, for paragraph breaks,
    lists and code (the shapes that tokenise differently once generated)."""
    head = SHAPES[(turn + turn // len(TOPICS)) % len(SHAPES)].format(topic=TOPICS[turn % len(TOPICS)])
    parts, n = [head], _count(tokenize, head)
    for k in range(len(FACTS)):
        fact = FACTS[(turn * 3 + k) % len(FACTS)]
        more = _count(tokenize, fact)
        if n + more > tokens:
            break
        n += more
        parts.append(fact)
    if n < tokens - 8:  # a long wish: fill with prose
        parts.append(prose(tokenize, tokens - n, turn))
    return " ".join(parts)


def shaped(text: str) -> dict[str, bool]:
    """What a reply holds of the shapes asked for."""
    return {"paragraph_break": "\n\n" in text, "list": bool(_ITEM.search(text)), "code": "`" in text}
