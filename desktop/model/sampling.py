"""Token selection from logits: repetition penalty, temperature, top-k, top-p, seeded sampling.
One Sampler per sequence owns its generator (and, for a constrained reply, its grammar's
Constraint: model/grammar.py, which masks each step's logits and follows the tokens picked). The filtering and the draw work on rows [B, vocab]:
sample_batch argmaxes greedy rows in one call and samples rows that share their settings in one
pass on a GPU (each row still draws from its own generator), with the same code a single row
runs, so a seeded reply does not depend on what it was batched with."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from desktop.model.params import SamplingParams


NUCLEUS_STEPS = (256, 4096)  # candidates the top-p search tries before sorting the whole vocab


class Sampler:
    """Per-sequence sampler; holds its own torch.Generator seeded from params.seed (or random
    when None).

    Steps follow Hugging Face's order: repetition penalty, then greedy argmax or temperature,
    top-k, top-p, and a draw from the generator. All maths is float32; the caller's logits
    are never modified. Ties in greedy mode go to the lowest index (torch.argmax)."""

    def __init__(self, params: SamplingParams, device: str = "cpu") -> None:
        self.params = params
        self.generator = torch.Generator(device=device)
        if params.seed is None:
            self.seed: int = self.generator.seed()  # non-deterministic; kept for logging
        else:
            self.seed = params.seed
            self.generator.manual_seed(params.seed)
        self.constraint = None  # a grammar.Constraint when the reply must follow params.grammar

    @property
    def needs_history(self) -> bool:
        """Whether the repetition penalty reads the history (otherwise it may be empty)."""
        return self.params.repetition_penalty != 1.0

    @property
    def batchable(self) -> bool:
        """Whether a batched argmax may pick for this row (greedy, no penalty, no grammar)."""
        return self.params.greedy and not self.needs_history and self.constraint is None

    def __call__(self, logits: torch.Tensor, history: Sequence[int] | torch.Tensor) -> int:
        """Pick the next token id from 1-D `logits` [vocab] given the ids seen so far."""
        x = logits.float()
        if self.needs_history and len(history):
            x = apply_repetition_penalty(x, history, self.params.repetition_penalty)
        if self.constraint is not None:
            x = self.constraint.mask(x)
        token = int(torch.argmax(x)) if self.params.greedy else self._sample(x / self.params.temperature)
        if self.constraint is not None:
            self.constraint.advance(token)
        return token

    def _sample(self, x: torch.Tensor) -> int:
        return sample_rows([self], x[None])[0]

    def uniform(self) -> torch.Tensor:
        """One uniform draw from this sequence's generator, shape [1]."""
        return torch.rand(1, generator=self.generator, device=self.generator.device)


def sample_rows(samplers: Sequence[Sampler], x: torch.Tensor) -> list[int]:
    """Draw one token per row of temperature-scaled float32 logits `x` [B, vocab]; every sampler
    has the same top_k and top_p. Inverse-CDF draws with one uniform from each row's generator
    (torch.multinomial is several times slower on a CPU vocab of 150k); zero-probability tokens
    are never returned."""
    params = samplers[0].params
    probs, ids = top_k_top_p(x, params.top_k, params.top_p)
    cdf = torch.cumsum(probs, dim=-1)
    u = torch.cat([s.uniform().to(cdf.device) for s in samplers])[:, None]
    idx = torch.searchsorted(cdf, u * cdf[:, -1:], right=True).clamp_(max=cdf.shape[-1] - 1)
    # float32 rounding can land on a zero-probability token (an empty step of the CDF):
    # map any index to the first with the same CDF value, the token that made that step.
    idx = torch.searchsorted(cdf, cdf.gather(-1, idx))
    return (idx if ids is None else ids.gather(-1, idx))[:, 0].tolist()


def top_k_top_p(
    x: torch.Tensor, top_k: int, top_p: float
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Filter float32 logits (one row [vocab] or rows [B, vocab]) to the candidates to draw
    from: (probs, ids), shaped like x along the leading dimension.

    `probs` sum to at most 1 (dropped candidates are 0); ids is None when probs cover the whole
    vocab, otherwise the token id of each entry, in descending order of logit. Nothing sorts
    the whole vocab unless the nucleus is large: a partial top-k is ~20x cheaper at 150k."""
    if 0 < top_k < x.shape[-1]:
        vals, ids = torch.topk(x, top_k)
        probs = torch.softmax(vals, dim=-1)  # top-p sees the distribution top-k left
    elif top_p < 1.0:
        lse = torch.logsumexp(x, dim=-1, keepdim=True)
        for k in (*NUCLEUS_STEPS, x.shape[-1]):
            if k >= x.shape[-1]:
                vals, ids = torch.sort(x, descending=True)
                break
            vals, ids = torch.topk(x, k)
            if bool((torch.exp(vals - lse).sum(-1) >= top_p).all()):
                break  # every row's nucleus ends inside these k candidates
        probs = torch.exp(vals - lse)
    else:
        return torch.softmax(x, dim=-1), None
    if top_p < 1.0:
        # Keep a token while the mass strictly above it is below top_p; the first always stays.
        keep = torch.cumsum(probs, dim=-1) - probs < top_p
        keep[..., 0] = True
        probs = probs.masked_fill(~keep, 0.0)
    return probs, ids


def apply_repetition_penalty(
    x: torch.Tensor, history: Sequence[int] | torch.Tensor, penalty: float
) -> torch.Tensor:
    """CTRL penalty on tokens in `history`: divide positive logits by `penalty`, multiply negative.

    Returns a new tensor; duplicates in `history` are harmless (scatter writes the same value).
    Image positions (negative ids, model/images.py) are no tokens: they are left out."""
    idx = torch.as_tensor(history, dtype=torch.long, device=x.device)
    idx = idx[idx >= 0]
    score = x.gather(0, idx)
    score = torch.where(score < 0, score * penalty, score / penalty)
    return x.scatter(0, idx, score)


def sample_batch(
    samplers: Sequence[Sampler],
    logits: torch.Tensor,
    histories: Sequence[Sequence[int] | torch.Tensor],
) -> list[int]:
    """One token per row of `logits` [B, vocab]; row i uses samplers[i] and histories[i].

    Rows that are greedy without repetition penalty share one batched argmax; on a GPU, rows that
    sample without a penalty are sampled together per (temperature, top_k, top_p); the rest one by
    one (measured on this CPU at B=8, vocab 49k, top-p: 4.7 ms a row at a time, 8–14 ms together)."""
    if not len(samplers) == logits.shape[0] == len(histories):
        raise ValueError(
            f"batch mismatch: {len(samplers)} samplers, {logits.shape[0]} rows, "
            f"{len(histories)} histories"
        )
    plain = [s.batchable for s in samplers]
    if all(plain):
        return torch.argmax(logits, dim=-1).tolist()
    out: list[int | None] = [None] * len(samplers)
    if any(plain):
        for i, token in enumerate(torch.argmax(logits, dim=-1).tolist()):
            out[i] = token if plain[i] else None
    groups: dict[tuple, list[int]] = {}
    for i, s in enumerate(samplers):
        # on a CPU a row at a time is as fast (top-k dominates, row by row either way); on a GPU
        # one pass saves a round of kernel launches per row
        if (logits.device.type != "cpu" and not plain[i] and not s.params.greedy and not s.needs_history
                and s.constraint is None):
            groups.setdefault((s.params.temperature, s.params.top_k, s.params.top_p), []).append(i)
    for (temperature, _, _), rows in groups.items():
        x = logits[rows].float() / temperature
        for i, token in zip(rows, sample_rows([samplers[i] for i in rows], x)):
            out[i] = token
    return [t if t is not None else samplers[i](logits[i], histories[i]) for i, t in enumerate(out)]
