"""On the embedded default (SmolLM2-135M): ten follow-ups to replies with paragraph breaks and
lists re-read none of the replies' tokens (issue 22 §0); prints what reading each reply by its
text's tokens, as before, would have re-read."""

from __future__ import annotations

import pytest
from worker_helpers import A, S, U, make_client

from desktop.model.chunks import ChunkMemo
from desktop.model.loader import ModelSpec, load_model
from desktop.model.params import SamplingParams
from desktop.protocol import Chat, Done
from desktop.workers.slots import common_prefix

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


def test_follow_ups_reread_no_reply_tokens(smol, monkeypatch):
    """Tokens of earlier replies prefilled again over ten follow-ups: none. Before issue 22 a
    reply was read by its text's tokens, and the follow-up re-read it from where they differ
    from the generated ones (`before`: those tokens, counted here; the test needs one)."""
    t = smol.template
    monkeypatch.setattr(t, "memo", ChunkMemo())  # nothing kept from other tests
    client = make_client(smol, num_slots=2)
    conv, after, before, last = [S], [], [], None
    for n, question in enumerate(QUESTIONS):
        conv.append(U(question))
        done = client.run(Chat(f"q{n}", tuple(conv), SamplingParams(max_tokens=64, temperature=0.6, seed=n)))[-1]
        assert isinstance(done, Done), done
        if last is not None:  # beyond the reply's last id, its close, the question and the reply prompt
            floor = 1 + len(t.close_after_reply(last)) + len(t.encode_delta(conv[:-1], conv[-1:]).ids) + len(t.gen_prompt_ids)
            after.append(done.stats.new_tokens - floor)
            content = last[:-1] if last[-1] in t.eos_ids else last
            before.append(len(content) - common_prefix(content, t.control.encode(conv[-2].content)))
        last = list(done.token_ids)
        conv.append(A(done.text))
    print(f"reply tokens re-read over {len(after)} follow-ups: before {sum(before)} "
          f"({sum(b > 0 for b in before)} follow-ups), after {sum(after)} ({sum(a > 0 for a in after)})")
    assert after == [0] * len(after)
    assert sum(before) > 0  # the case exists on this model: the test can fail
