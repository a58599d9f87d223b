"""On the embedded default (SmolLM2-135M): ten follow-ups to replies with paragraph breaks and
lists re-read none of the replies' tokens (issue 22 §0), where reading each reply by its text's
tokens, as before, re-read some. Both ways in one run; prints the counts."""

from __future__ import annotations

import pytest
from worker_helpers import A, S, U, make_client

from desktop.model.chunks import ChunkMemo
from desktop.model.loader import ModelSpec, load_model
from desktop.model.params import SamplingParams
from desktop.protocol import Chat, Done

pytestmark = [pytest.mark.real_model, pytest.mark.slow, pytest.mark.timeout(1200)]

QUESTIONS = [
    "Give me three tips for sleeping better, as a numbered list.",
    "Explain in two short paragraphs why the sky is blue.",
    "List four fruits with one line about each.",
    "Write a tiny Python function that adds two numbers, with a sentence before and after.",
    "What are the steps to boil an egg? Use bullet points.",
    "Describe a cat in two paragraphs.",
    "Name three planets and say one thing about each, as a list.",
    "Give me a short packing list for a weekend trip.",
    "Write two paragraphs about the sea.",
    "Summarise our conversation as a bulleted list.",
    "Thank you! One last list: three colours.",
]


@pytest.fixture(scope="module")
def smol():
    return load_model(ModelSpec("default"))


def reread(smol, monkeypatch, as_generated: bool) -> tuple[int, int]:
    """Tokens of earlier replies prefilled again over ten follow-ups, and the follow-ups that did."""
    t = smol.template
    monkeypatch.setattr(t, "memo", ChunkMemo())  # nothing kept from another run
    if not as_generated:  # before issue 22: a reply's canonical ids were its text's tokens
        monkeypatch.setattr(t, "_spelled", lambda *args: None)
    client = make_client(smol, num_slots=2)
    conv, total, turns, last = [S], 0, 0, None
    for n, question in enumerate(QUESTIONS):
        conv.append(U(question))
        done = client.run(Chat(f"q{n}", tuple(conv), SamplingParams(max_tokens=64, temperature=0.6, seed=n)))[-1]
        assert isinstance(done, Done), done
        if last is not None:  # beyond the reply's last id, its close, the question and the reply prompt
            floor = 1 + len(t.close_after_reply(last)) + len(t.encode_delta(conv[:-1], conv[-1:]).ids) + len(t.gen_prompt_ids)
            total += done.stats.new_tokens - floor
            turns += done.stats.new_tokens > floor
        last = list(done.token_ids)
        conv.append(A(done.text))
    monkeypatch.undo()
    return total, turns


def test_follow_ups_reread_no_reply_tokens(smol, monkeypatch):
    before = reread(smol, monkeypatch, as_generated=False)
    after = reread(smol, monkeypatch, as_generated=True)
    print(f"reply tokens re-read over 10 follow-ups: before {before[0]} ({before[1]} follow-ups), after {after[0]} ({after[1]})")
    assert after == (0, 0)
    assert before[0] > 0  # the case exists on this model: the test can fail
