"""Decode steps of the static runner: how one step of B running rows is executed.

`EagerSteps` runs the forward with the exact shapes (B rows, attention over max(pos)+1). The
other two run fixed shapes so that a step can be captured once and replayed: B is rounded up to
a batch bucket and the attended length to a power-of-two length bucket; padded rows take token 0
at the pool's scratch column (cap - 1, never a valid position) and their logits are dropped.
`BucketedSteps` runs those fixed shapes eagerly — the CPU twin of `CudaGraphSteps`, which
captures each (batch bucket, length bucket, pool generation) in a CUDA graph on first use and
replays it afterwards (static input buffers, the pool's tensors at fixed addresses)."""

from __future__ import annotations

from typing import Any, Sequence

import torch

from desktop.model.kv_pool import KVPool, pow2_at_least

MIN_LENGTH_BUCKET = 256


def batch_buckets(rows: int) -> list[int]:
    """1, 2, 4, 8, … below `rows`, then `rows` itself (a step never pads past the pool)."""
    out, b = [], 1
    while b < rows:
        out.append(b)
        b *= 2
    return out + [rows]


class EagerSteps:
    def __init__(self, net: Any) -> None:
        self.net = net

    def __call__(self, pool: KVPool, tokens: Sequence[int], positions: Sequence[int]) -> torch.Tensor:
        """Logits [B, vocab] of rows 0..B-1 taking tokens at positions."""
        dev = self.net.device
        tok = torch.tensor(tokens, dtype=torch.long, device=dev)[:, None]
        pos = torch.tensor(positions, dtype=torch.long, device=dev)[:, None]
        return self.net.forward(pool, 0, tok, pos, max(positions) + 1)


class BucketedSteps(EagerSteps):
    def shape(self, pool: KVPool, batch: int, longest: int) -> tuple[int, int]:
        """(batch bucket, length bucket) for `batch` rows whose largest position is longest - 1."""
        b = next(x for x in batch_buckets(pool.rows) if x >= batch)
        length = min(pow2_at_least(longest, MIN_LENGTH_BUCKET), pool.cap)
        return b, length

    def __call__(self, pool: KVPool, tokens: Sequence[int], positions: Sequence[int]) -> torch.Tensor:
        n = len(tokens)
        b, length = self.shape(pool, n, max(positions) + 1)
        scratch = pool.cap - 1
        tok = list(tokens) + [0] * (b - n)
        pos = list(positions) + [scratch] * (b - n)
        return self.run(pool, b, length, tok, pos)[:n]

    def run(self, pool: KVPool, b: int, length: int, tok: list[int], pos: list[int]) -> torch.Tensor:
        dev = self.net.device
        return self.net.forward(pool, 0, torch.tensor(tok, device=dev)[:, None],
                                torch.tensor(pos, device=dev)[:, None], length)


class _Captured:
    def __init__(self, tok: torch.Tensor, pos: torch.Tensor) -> None:
        self.tok, self.pos = tok, pos
        self.graph = torch.cuda.CUDAGraph()
        self.out: torch.Tensor | None = None


class CudaGraphSteps(BucketedSteps):
    """One CUDA graph per (batch bucket, length bucket); all share one memory pool. Graphs of an
    older pool generation (the pool was reshaped: new addresses) are dropped, and their memory
    pool with them: a new generation captures into a new pool (capturing into a pool whose
    graphs were all freed fails an allocator assert, seen on the first GPU run, issue 25)."""

    def __init__(self, net: Any) -> None:
        super().__init__(net)
        self.graphs: dict[tuple[int, int], _Captured] = {}
        self.generation = -1
        self.mempool = torch.cuda.graph_pool_handle()

    def run(self, pool: KVPool, b: int, length: int, tok: list[int], pos: list[int]) -> torch.Tensor:
        if pool.generation != self.generation:
            self.graphs.clear()
            self.mempool = torch.cuda.graph_pool_handle()
            self.generation = pool.generation
        dev = self.net.device
        captured = self.graphs.get((b, length))
        if captured is None:
            captured = self.graphs[(b, length)] = self._capture(pool, b, length)
        captured.tok.copy_(torch.tensor(tok, device=dev)[:, None], non_blocking=True)
        captured.pos.copy_(torch.tensor(pos, device=dev)[:, None], non_blocking=True)
        captured.graph.replay()
        if self.net.on_layer is not None:
            self.net.on_layer()
        return captured.out

    def _capture(self, pool: KVPool, b: int, length: int) -> _Captured:
        dev = self.net.device
        # warm up on the pool's scratch column (never a valid position) so the capture's writes are harmless
        scratch = torch.full((b, 1), pool.cap - 1, dtype=torch.long, device=dev)
        cap = _Captured(torch.zeros((b, 1), dtype=torch.long, device=dev), scratch.clone())
        self.net.tables(pool.cap)
        watcher, self.net.on_layer = self.net.on_layer, None
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(2):
                    self.net.forward(pool, 0, cap.tok, cap.pos, length)
            torch.cuda.current_stream().wait_stream(side)
            with torch.cuda.graph(cap.graph, pool=self.mempool):
                cap.out = self.net.forward(pool, 0, cap.tok, cap.pos, length)
        finally:
            self.net.on_layer = watcher
        return cap


def make_steps(net: Any, kind: str = "auto") -> EagerSteps:
    """"auto": CUDA graphs on a CUDA device, exact-shape eager steps elsewhere; "eager",
    "bucketed" or "graphs" force one."""
    if kind == "auto":
        kind = "graphs" if net.device.type == "cuda" else "eager"
    return {"eager": EagerSteps, "bucketed": BucketedSteps, "graphs": CudaGraphSteps}[kind](net)
