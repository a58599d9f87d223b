"""The tiny test model is the same whatever else runs: two hosts that build it at once must get
identical weights (it once seeded torch's global generator, so concurrent builds differed)."""

from __future__ import annotations

import threading

import pytest
import torch

from desktop.model.tiny import tiny_model

pytestmark = pytest.mark.hardening


def _weights(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_concurrent_builds_get_identical_weights():
    reference = _weights(tiny_model(seed=0))
    results: list[dict[str, torch.Tensor]] = []
    start = threading.Barrier(4)

    def build() -> None:
        start.wait()
        for _ in range(3):
            results.append(_weights(tiny_model(seed=0)))
            torch.randn(1000)  # other users of the global generator, as a busy test would have

    threads = [threading.Thread(target=build) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert len(results) == 12
    for weights in results:
        assert weights.keys() == reference.keys()
        for name, tensor in reference.items():
            assert torch.equal(weights[name], tensor), name


def test_weights_do_not_depend_on_the_global_generator():
    torch.manual_seed(123)
    a = _weights(tiny_model(seed=5))
    torch.manual_seed(999)
    torch.randn(777)
    b = _weights(tiny_model(seed=5))
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_different_seeds_differ():
    a, b = _weights(tiny_model(seed=0)), _weights(tiny_model(seed=1))
    assert any(not torch.equal(a[k], b[k]) for k in a)
