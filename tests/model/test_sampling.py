"""Tests of Sampler and sample_batch: greedy, seeding, top-k/top-p, repetition penalty,
temperature, and the batched greedy fast path."""

from __future__ import annotations

import torch

from desktop.model.params import SamplingParams
from desktop.model.sampling import Sampler, sample_batch, sample_rows, top_k_top_p

VOCAB = 340


def _logits(seed: int = 0, rows: int | None = None) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    shape = (rows, VOCAB) if rows else (VOCAB,)
    return torch.randn(shape, generator=g) * 3


def _draws(sampler: Sampler, logits: torch.Tensor, n: int, history=()) -> list[int]:
    return [sampler(logits, history) for _ in range(n)]


def test_greedy_is_argmax() -> None:
    s = Sampler(SamplingParams())
    for seed in range(20):
        x = _logits(seed)
        assert s(x, []) == int(torch.argmax(x))


def test_greedy_tie_goes_to_lowest_index() -> None:
    x = torch.zeros(VOCAB)
    x[[7, 3, 200]] = 5.0
    assert Sampler(SamplingParams())(x, []) == 3


def test_bf16_logits_and_input_untouched() -> None:
    x = _logits(1)
    before = x.clone()
    p = SamplingParams(temperature=0.7, top_k=20, top_p=0.9, repetition_penalty=1.3, seed=0)
    s = Sampler(p)
    s(x, [1, 2, 3])
    assert torch.equal(x, before)
    assert Sampler(SamplingParams())(x.bfloat16(), []) == int(torch.argmax(x.bfloat16()))


def test_batch_fast_path_equals_per_row() -> None:
    x = _logits(2, rows=6)
    samplers = [Sampler(SamplingParams()) for _ in range(6)]
    assert sample_batch(samplers, x, [[]] * 6) == [s(x[i], []) for i, s in enumerate(samplers)]
    assert sample_batch(samplers, x, [[]] * 6) == torch.argmax(x, dim=-1).tolist()


def test_batch_mixed_rows_equal_per_row() -> None:
    x = _logits(3, rows=4)
    kinds = [
        SamplingParams(),
        SamplingParams(temperature=0.8, seed=5),
        SamplingParams(repetition_penalty=1.5),
        SamplingParams(temperature=1.2, top_k=5, seed=9),
    ]
    hist = [[1], [2, 3], [int(torch.argmax(x[2]))], []]
    got = sample_batch([Sampler(p) for p in kinds], x, hist)
    want = [Sampler(p)(x[i], hist[i]) for i, p in enumerate(kinds)]
    assert got == want


def test_rows_sampled_together_equal_each_alone() -> None:
    """Rows that share settings sampled in one pass (sample_rows, what a GPU batch runs; each row
    draws from its own generator): every draw equals what the row's sampler gives alone, over
    many steps — also when one row's nucleus is wide (a flat row makes the pass look at more
    candidates) and another's narrow."""
    vocab = 6000  # more than the 4096-candidate step of the top-p search
    g = torch.Generator().manual_seed(11)
    x = torch.randn(5, vocab, generator=g) * torch.tensor([[4.0], [0.01], [2.0], [4.0], [1.0]])
    kinds = [SamplingParams(temperature=0.7, top_p=0.9, seed=i) for i in range(4)] + [SamplingParams(temperature=0.7, top_k=40, seed=7)]
    together, alone = [Sampler(p) for p in kinds], [Sampler(p) for p in kinds]

    def batch() -> list[int]:
        return sample_rows(together[:4], x[:4] / 0.7) + sample_rows(together[4:], x[4:] / 0.7)

    for _ in range(30):
        assert batch() == [s(x[i], []) for i, s in enumerate(alone)]
        assert sample_batch(together, x, [[]] * 5) == [s(x[i], []) for i, s in enumerate(alone)]
    assert len({tuple(batch()) for _ in range(5)}) > 1  # they do sample


def test_seeded_sampling_reproducible_and_seeds_differ() -> None:
    x = _logits(4) / 3  # flatter, so draws vary
    p = dict(temperature=1.0, top_p=0.95)
    a = _draws(Sampler(SamplingParams(seed=123, **p)), x, 100)
    b = _draws(Sampler(SamplingParams(seed=123, **p)), x, 100)
    c = _draws(Sampler(SamplingParams(seed=124, **p)), x, 100)
    assert a == b
    assert a != c
    assert len(set(a)) > 10


def test_unseeded_samplers_differ() -> None:
    x = _logits(5) / 3
    a = _draws(Sampler(SamplingParams(temperature=1.0)), x, 100)
    b = _draws(Sampler(SamplingParams(temperature=1.0)), x, 100)
    assert a != b


def test_top_k_one_is_greedy() -> None:
    s = Sampler(SamplingParams(temperature=2.0, top_k=1, seed=0))
    for seed in range(20):
        x = _logits(seed)
        assert s(x, []) == int(torch.argmax(x))


def test_top_k_keeps_only_top_candidates() -> None:
    x = _logits(6) / 3
    top = set(torch.topk(x, 5).indices.tolist())
    draws = set(_draws(Sampler(SamplingParams(temperature=3.0, top_k=5, seed=1)), x, 300))
    assert draws <= top and len(draws) > 1


def test_tiny_top_p_keeps_only_top_token() -> None:
    x = _logits(7) / 3
    s = Sampler(SamplingParams(temperature=3.0, top_p=1e-6, seed=2))
    assert set(_draws(s, x, 200)) == {int(torch.argmax(x))}


def test_top_p_keeps_smallest_nucleus() -> None:
    x = torch.full((VOCAB,), -1e4)
    x[:3] = torch.log(torch.tensor([0.5, 0.3, 0.2]))
    draws = set(_draws(Sampler(SamplingParams(temperature=1.0, top_p=0.75, seed=3)), x, 300))
    assert draws == {0, 1}


def test_repetition_penalty_flips_argmax() -> None:
    x = torch.zeros(VOCAB)
    x[0], x[1] = 2.0, 1.9
    assert Sampler(SamplingParams())(x, []) == 0
    assert Sampler(SamplingParams(repetition_penalty=1.2))(x, [0, 0, 5]) == 1
    assert Sampler(SamplingParams(repetition_penalty=1.2))(x, torch.tensor([0])) == 1


def test_repetition_penalty_makes_negative_logits_more_negative() -> None:
    x = torch.full((VOCAB,), -5.0)
    x[0], x[1] = -1.0, -1.1
    assert Sampler(SamplingParams(repetition_penalty=1.2))(x, [0]) == 1


def test_repetition_penalty_lowers_sampling_chance() -> None:
    x = torch.full((VOCAB,), -1e4)
    x[:2] = 1.0
    plain = _draws(Sampler(SamplingParams(temperature=1.0, seed=4)), x, 1000, [0])
    hot = Sampler(SamplingParams(temperature=1.0, repetition_penalty=2.0, seed=4))
    penal = _draws(hot, x, 1000, [0])
    assert 440 < plain.count(0) < 560
    assert 320 < penal.count(0) < 440  # p(0) = 1 / (1 + e^0.5) ≈ 0.38


def test_temperature_sharpens_and_flattens() -> None:
    x = torch.full((VOCAB,), -1e4)
    x[:3] = torch.tensor([1.0, 0.0, -1.0])
    n = 2000
    for t in (0.5, 1.0, 2.0):
        draws = _draws(Sampler(SamplingParams(temperature=t, seed=11)), x, n)
        want = torch.softmax(x[:3] / t, dim=-1)
        got = torch.tensor([draws.count(i) / n for i in range(3)])
        assert torch.allclose(got, want, atol=0.04), (t, got, want)
    cold = _draws(Sampler(SamplingParams(temperature=0.5, seed=11)), x, n).count(0)
    hot = _draws(Sampler(SamplingParams(temperature=2.0, seed=11)), x, n).count(0)
    assert cold > hot + 400


def _hf_top_p_keep(x: torch.Tensor, top_p: float) -> set[int]:
    """Reference: Hugging Face's TopPLogitsWarper on a fully sorted vocab."""
    sorted_logits, sorted_ids = torch.sort(x, descending=False)
    remove = torch.softmax(sorted_logits, -1).cumsum(-1) <= 1 - top_p
    remove[-1] = False
    return set(sorted_ids[~remove].tolist())


def test_top_p_matches_full_sort_reference_for_any_nucleus_size() -> None:
    g = torch.Generator().manual_seed(8)
    x = torch.randn(12000, generator=g)
    for scale in (0.3, 2.0, 3.5, 12.0):  # nuclei of ~10000, ~3000, ~300 and 1 token
        probs, ids = top_k_top_p(x * scale, 0, 0.9)
        assert set(ids[probs > 0].tolist()) == _hf_top_p_keep(x * scale, 0.9), scale
    probs, ids = top_k_top_p(x, 50, 0.9)
    assert set(ids.tolist()) == set(torch.topk(x, 50).indices.tolist())
    assert set(ids[probs > 0].tolist()) == set(ids[: int((probs > 0).sum())].tolist())


def test_masked_tokens_never_drawn() -> None:
    x = torch.full((VOCAB,), float("-inf"))
    allowed = [5, 17, 300, VOCAB - 1]
    x[allowed] = torch.tensor([0.0, -30.0, 1.0, -2.0])
    for p in (
        SamplingParams(temperature=1.0, seed=0),
        SamplingParams(temperature=2.0, top_p=0.99, seed=0),
    ):
        assert set(_draws(Sampler(p), x, 500)) <= set(allowed)
