"""Constrained sampling: a grammar masks each pick to what it allows (in a batch beside free rows
too), follows the tokens picked, and at its end allows only the end of turn."""

import json

import pytest
import torch

from desktop.model.grammar import Grammars, json_grammar, tool_call_grammar
from desktop.model.params import SamplingParams
from desktop.model.sampling import Sampler, sample_batch
from desktop.model.tiny import tiny_tokenizer
from desktop.errors import InvalidRequest


@pytest.fixture(scope="module")
def grammars():
    tok = tiny_tokenizer()
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    return tok, eos, Grammars(tok, [eos])


def decode_constrained(tok, sampler, vocab, steps, seed=0):
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(steps):
        logits = torch.randn(vocab, generator=gen)
        [token] = sample_batch([Sampler(SamplingParams()), sampler], torch.stack([logits, logits]), [(), ()])[1:]
        out.append(token)
        if sampler.constraint.done and token in sampler.constraint.eos_ids:
            break
    return out


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_random_logits_still_give_a_valid_call(grammars, temperature):
    tok, eos, g = grammars
    fn = {"name": "search", "parameters": {"type": "object", "properties": {"q": {"type": "string", "maxLength": 5}},
                                           "required": ["q"], "additionalProperties": False}}
    sampler = Sampler(SamplingParams(temperature=temperature, seed=3, grammar=tool_call_grammar([fn])))
    sampler.constraint = g.constraint(sampler.params.grammar)
    ids = decode_constrained(tok, sampler, len(tok), 300)
    assert ids[-1] == eos  # the grammar ended, then only the end of turn was allowed
    text = tok.decode(ids[:-1])
    assert text.startswith("<tool_call>\n") and text.endswith("\n</tool_call>")
    call = json.loads(text[len("<tool_call>\n"):-len("\n</tool_call>")])
    assert call["name"] == "search" and set(call["arguments"]) == {"q"} and len(call["arguments"]["q"]) <= 5


def test_without_the_mask_random_logits_give_no_json(grammars):
    tok, _, _ = grammars
    sampler = Sampler(SamplingParams())
    logits = torch.randn(20, len(tok), generator=torch.Generator().manual_seed(0))
    text = tok.decode([sampler(row, ()) for row in logits])
    with pytest.raises(ValueError):
        json.loads(text)


def test_a_grammar_the_library_refuses_is_invalid_request(grammars):
    _, _, g = grammars
    with pytest.raises(InvalidRequest):
        g.constraint(json_grammar({"type": "string", "pattern": "(unclosed"}))
