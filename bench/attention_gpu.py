"""Attention kernels for the static runner's shapes on a GPU, side by side (issue 25's first run
found decode attention over a long pool taking 0.66 ms a layer). 8B head layout (32 query heads,
8 KV heads, head dim 128), bf16, CUDA events, median of 20 after warm-up.

  decode   B rows of one token over L positions, the mask the runner builds ([B, 1, 4, L], GQA
           folded into query rows): SDPA's default choice, each backend forced, and a plain
           matmul-softmax-matmul; `nomask_gqa` (flash, native GQA, no mask) is the floor when
           every row has the same length.
  prefill  75 new tokens over a 17k history: the masked path vs the lower-right causal bias.

The last line is JSON: milliseconds per call, or the error a backend gave."""

from __future__ import annotations

import json
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.bias import causal_lower_right

NH, NKV, HD = 32, 8, 128
REP = NH // NKV


def timed(fn, repeats: int = 20) -> float:
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return round(statistics.median(times), 4)


def attempt(fn) -> float | str:
    try:
        return timed(fn)
    except Exception as exc:  # noqa: BLE001 - a backend that refuses the shape is a finding
        return f"{type(exc).__name__}: {str(exc)[:120]}"


def manual(q, k, v, bias):
    s = torch.matmul(q, k.transpose(-1, -2)) * (HD ** -0.5) + bias
    return torch.matmul(torch.softmax(s.float(), -1).to(q.dtype), v)


def decode_row(B: int, L: int) -> dict:
    dev, dt = "cuda", torch.bfloat16
    q = torch.randn(B, NKV, REP, HD, device=dev, dtype=dt)
    k = torch.randn(B, NKV, L, HD, device=dev, dtype=dt)
    v = torch.randn(B, NKV, L, HD, device=dev, dtype=dt)
    lengths = torch.randint(L // 2, L, (B,), device=dev)
    keep = torch.arange(L, device=dev)[None, :] < lengths[:, None]
    bias = torch.zeros(B, 1, REP, L, device=dev, dtype=dt).masked_fill_(~keep[:, None, None, :], float("-inf"))
    row = {"B": B, "L": L, "kv_mb": round(2 * k.numel() * 2 / 2**20, 1)}
    row["default"] = attempt(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=bias))
    for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("efficient", SDPBackend.EFFICIENT_ATTENTION),
                          ("math", SDPBackend.MATH)):
        def run(backend=backend):
            with sdpa_kernel([backend]):
                F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        row[name] = attempt(run)
    row["manual"] = attempt(lambda: manual(q, k, v, bias))
    qh = q.reshape(B, NH, 1, HD)
    row["nomask_gqa"] = attempt(lambda: F.scaled_dot_product_attention(qh, k, v, enable_gqa=True))
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=bias).float()
    row["manual_max_err"] = round(float((manual(q, k, v, bias).float() - ref).abs().max()), 4)
    return row


def prefill_row(T: int, L: int) -> dict:
    dev, dt = "cuda", torch.bfloat16
    qh = torch.randn(1, NH, T, HD, device=dev, dtype=dt)
    k = torch.randn(1, NKV, L, HD, device=dev, dtype=dt)
    v = torch.randn(1, NKV, L, HD, device=dev, dtype=dt)
    q = qh.reshape(1, NKV, REP * T, HD)
    pos = torch.arange(L - T, L, device=dev)
    keep = (torch.arange(L, device=dev)[None, :] <= pos[:, None])[None, None].expand(1, REP, T, L).reshape(1, 1, REP * T, L)
    bias = torch.zeros(keep.shape, device=dev, dtype=dt).masked_fill_(~keep, float("-inf"))
    row = {"T": T, "L": L}
    row["masked"] = attempt(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=bias))
    row["causal_gqa"] = attempt(lambda: F.scaled_dot_product_attention(qh, k, v, attn_mask=causal_lower_right(T, L), enable_gqa=True))
    a = F.scaled_dot_product_attention(q, k, v, attn_mask=bias).reshape(1, NH, T, HD).float()
    b = F.scaled_dot_product_attention(qh, k, v, attn_mask=causal_lower_right(T, L), enable_gqa=True).float()
    row["max_err"] = round(float((a - b).abs().max()), 4)
    return row


def main() -> None:
    if not torch.cuda.is_available():
        raise SystemExit("bench/attention_gpu.py needs a CUDA device.")
    out = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "prefill": [prefill_row(75, 17049), prefill_row(512, 8704)], "decode": []}
    print(json.dumps(out["prefill"]), flush=True)
    for B in (1, 8, 32):
        for L in (2048, 32768):
            out["decode"].append(decode_row(B, L))
            print(json.dumps(out["decode"][-1]), flush=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
