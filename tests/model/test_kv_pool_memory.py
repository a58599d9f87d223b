"""The KV pool's host memory: zeros that cost only the positions written (model/kv_pool.py)."""

from __future__ import annotations

import sys

import pytest
import torch

from desktop.model.kv_pool import KVPool, SavedKV, lazy_zeros


def _resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_lazy_zeros_are_zeros_of_the_shape_and_dtype():
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        t = lazy_zeros((2, 3, 5, 4), dtype)
        assert t.shape == (2, 3, 5, 4) and t.dtype == dtype and t.is_contiguous()
        assert not t.any()
        t[1, 2, 4, 3] = 7  # writable, and only where written
        assert t.sum().item() == 7
    assert lazy_zeros((0, 3), torch.float32).shape == (0, 3)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_a_grown_pool_costs_the_positions_written_not_its_shape():
    """A pool shaped for long rows (what a restore of a long conversation into a new worker does)
    takes memory only where KV is written: torch.zeros would make all 256 MiB resident at once."""
    pool = KVPool(layers=4, rows=1, kv_heads=1, head_dim=64, dtype=torch.float32, device="cpu", cap=256)
    before = _resident_bytes()
    pool.reshape(4, 32768, [(0, 0, 0)])  # 4 layers x K,V x 4 rows x 1 head x 32768 x 64 x 4 B = 256 MiB
    assert pool.nbytes == 256 << 20
    n = 100
    saved = SavedKV(tuple(torch.randn(1, n, 64) for _ in range(4)), tuple(torch.randn(1, n, 64) for _ in range(4)))
    assert pool.load(saved, 2) == n
    grown = _resident_bytes() - before
    assert grown < 32 << 20, f"{grown >> 20} MiB resident after shaping a 256 MiB pool"
    for dst, src in zip(pool.k + pool.v, saved.k + saved.v):
        assert torch.equal(dst[2, :, :n], src)
        assert not dst[2, :, n:].any() and not dst[:2].any() and not dst[3].any()


def test_reshape_keeps_the_rows_it_is_told_to_and_zeroes_the_rest():
    pool = KVPool(layers=2, rows=2, kv_heads=1, head_dim=8, dtype=torch.float32, device="cpu", cap=16)
    for t in pool.k + pool.v:
        t.normal_()
    before = [t[1, :, :5].clone() for t in pool.k + pool.v]
    pool.reshape(3, 64, [(1, 2, 5)])
    for t, old in zip(pool.k + pool.v, before):
        assert torch.equal(t[2, :, :5], old)
        assert not t[2, :, 5:].any() and not t[:2].any()
