"""Best CPU recipe found (issue 9): a hand-written Llama decode step for SmolLM2-135M.

- linears of the layers: int4, groups of 32 along K, asymmetric -> exactly the GGUF's Q4_1 blocks
  (torch._weight_int4pack_mm_for_cpu; fast only with bf16 activations);
- lm_head (tied embedding): bf16, prepacked for oneDNN, called through a custom op so that
  torch.compile neither traces the opaque packed tensor nor needs freezing;
- KV: one preallocated bf16 buffer per layer and per K/V, [max_batch, kv_heads, max_len, head_dim];
  a step writes each row's K/V at that row's position (index_put) and attends over [:L] with a
  mask kpos <= pos (rows of different lengths need no padding);
- the decode step (T=1) is torch.compile'd with dynamic=False; L is a bucket (multiple of 256),
  so one graph per (B, L-bucket); prefill runs the same forward eagerly (T>1, matmul attention).
"""
import math
import torch
import torch.nn.functional as F
from torch import nn

_PACKED: list = []


@torch.library.custom_op("omni_recipe::packed_linear", mutates_args=())
def packed_linear(x: torch.Tensor, handle: int, n: int) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, _PACKED[handle], None, "none", [], "")


@packed_linear.register_fake
def _(x, handle, n):
    return x.new_empty(x.shape[0], n)


def int4_q4_1(w: torch.Tensor):
    """[N, K] float weights -> (packed uint8 [N, K/2], scales_and_zeros bf16 [K/32, N, 2]).
    Dequantised as (q - 8) * scale + zero; min/max per 32-block recovers Q4_1's d and m exactly."""
    N, K = w.shape
    g = w.float().view(N, K // 32, 32)
    mn, mx = g.amin(-1), g.amax(-1)
    d = ((mx - mn) / 15).clamp(min=1e-10)
    q = torch.round((g - mn[..., None]) / d[..., None]).clamp(0, 15).to(torch.int32).view(N, K)
    sz = torch.stack([d, mn + 8 * d], -1).transpose(0, 1).contiguous().to(torch.bfloat16)
    return torch._convert_weight_to_int4pack_for_cpu(q, 2), sz


def rms(x, w, eps: float):
    xf = x.float()
    return w * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def rot(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class DecodeModel(nn.Module):
    def __init__(self, hf, max_batch=1, max_len=2048):
        super().__init__()
        c = hf.config
        self.nl, self.H, self.nh, self.nkv = c.num_hidden_layers, c.hidden_size, c.num_attention_heads, c.num_key_value_heads
        self.hd = getattr(c, "head_dim", None) or self.H // self.nh
        self.eps, self.max_len = float(c.rms_norm_eps), max_len
        sd = {k: v.detach() for k, v in hf.state_dict().items()}
        bf = torch.bfloat16
        reg = lambda n, t: self.register_buffer(n, t.contiguous(), persistent=False)
        reg("emb", sd["model.embed_tokens.weight"].to(bf))
        head = sd.get("lm_head.weight", sd["model.embed_tokens.weight"]).to(bf).contiguous()
        _PACKED.append(torch.ops.mkldnn._reorder_linear_weight(head, max_batch))
        self.head = (len(_PACKED) - 1, head.shape[0])
        reg("norm", sd["model.norm.weight"].to(bf))
        for i in range(self.nl):
            p = f"model.layers.{i}."
            g = lambda n: sd[p + n]
            for name, w in (("qkv", torch.cat([g("self_attn.q_proj.weight"), g("self_attn.k_proj.weight"), g("self_attn.v_proj.weight")])),
                            ("o", g("self_attn.o_proj.weight")),
                            ("gu", torch.cat([g("mlp.gate_proj.weight"), g("mlp.up_proj.weight")])),
                            ("d", g("mlp.down_proj.weight"))):
                wp, sz = int4_q4_1(w)
                reg(f"{name}{i}", wp); reg(f"{name}{i}_sz", sz)
            reg(f"ln1_{i}", g("input_layernorm.weight").to(bf)); reg(f"ln2_{i}", g("post_attention_layernorm.weight").to(bf))
            # one buffer per layer: writing into a view of a single [layers, ...] buffer makes
            # torch.compile copy the whole buffer back after every layer (100 ms/step)
            reg(f"k{i}", torch.zeros(max_batch, self.nkv, max_len, self.hd, dtype=bf))
            reg(f"v{i}", torch.zeros(max_batch, self.nkv, max_len, self.hd, dtype=bf))
        inv = 1.0 / (c.rope_parameters["rope_theta"] ** (torch.arange(0, self.hd, 2).float() / self.hd))
        f = torch.arange(max_len).float()[:, None] * inv[None]
        e = torch.cat((f, f), -1)
        reg("cos", e.cos().to(bf)); reg("sin", e.sin().to(bf))
        reg("kpos", torch.arange(max_len)); reg("bidx", torch.arange(max_batch)[:, None])

    def lin(self, x, name):
        w, sz = getattr(self, name), getattr(self, name + "_sz")
        y = torch._weight_int4pack_mm_for_cpu(x.reshape(-1, x.shape[-1]), w, 32, sz)
        return y.view(*x.shape[:-1], y.shape[-1])

    def forward(self, tok, pos, L: int):
        """tok, pos: int64 [B, T]. Writes K/V of these tokens at `pos` in rows 0..B-1 and returns
        float32 logits of the last token of each row [B, vocab]. L: attended length (bucket >= max pos + 1)."""
        B, T = tok.shape
        H, nh, nkv, hd = self.H, self.nh, self.nkv, self.hd
        rep = nh // nkv
        x = F.embedding(tok, self.emb)
        cos, sin = self.cos[pos].unsqueeze(1), self.sin[pos].unsqueeze(1)  # [B,1,T,hd]
        mask = self.kpos[:L][None, None, :] <= pos[:, :, None]  # [B,T,L]
        bidx = self.bidx[:B]
        for i in range(self.nl):
            q, k, v = self.lin(rms(x, getattr(self, f"ln1_{i}"), self.eps), f"qkv{i}").split([nh * hd, nkv * hd, nkv * hd], -1)
            q = q.view(B, T, nh, hd).transpose(1, 2)
            k = k.view(B, T, nkv, hd).transpose(1, 2)
            q, k = q * cos + rot(q) * sin, k * cos + rot(k) * sin
            kc, vc = getattr(self, f"k{i}"), getattr(self, f"v{i}")
            kc[bidx, :, pos] = k.transpose(1, 2)
            vc[bidx, :, pos] = v.view(B, T, nkv, hd)
            K, V = kc[:B, :, :L], vc[:B, :, :L]
            if T == 1:  # decode: broadcast-multiply-reduce, fused by inductor into one loop nest
                s = (q.reshape(B, nkv, rep, 1, hd).float() * K[:, :, None].float()).sum(-1) * (1 / math.sqrt(hd))
                p = torch.softmax(s.masked_fill(~mask.view(B, 1, 1, L), float("-inf")), -1)
                o = (p[..., None] * V[:, :, None].float()).sum(-2).to(x.dtype).reshape(B, 1, H)
            else:  # prefill: the rep query heads of a KV head as extra query rows, fp32 softmax
                s = torch.matmul(q.reshape(B, nkv, rep * T, hd), K.transpose(-1, -2)).float() * (1 / math.sqrt(hd))
                s = s.view(B, nkv, rep, T, L).masked_fill(~mask[:, None, None], float("-inf"))
                p = torch.softmax(s, -1).to(V.dtype).view(B, nkv, rep * T, L)
                o = torch.matmul(p, V).view(B, nh, T, hd).transpose(1, 2).reshape(B, T, H)
            x = x + self.lin(o, f"o{i}")
            g, u = self.lin(rms(x, getattr(self, f"ln2_{i}"), self.eps), f"gu{i}").chunk(2, -1)
            x = x + self.lin(F.silu(g) * u, f"d{i}")
        h, n = self.head
        return packed_linear(rms(x[:, -1], self.norm, self.eps), h, n).float()


def bucket(n, step=256):
    return -(-n // step) * step


if __name__ == "__main__":
    import sys, time, statistics
    sys.path.insert(0, "/tmp/probe")
    from common import load, load_str
    torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
    d = torch.load("/tmp/probe/ref.pt"); prompt, ref = d["prompt"], d["ref"]
    hf = load("float32").model
    for B in (1, 8):
        m = DecodeModel(hf, max_batch=B, max_len=1024).eval()
        step = torch.compile(m, dynamic=False, fullgraph=True)
        with torch.inference_mode():
            n = len(prompt)
            tok = m(torch.tensor([prompt] * B), torch.arange(n).expand(B, n), bucket(n)).argmax(-1)
            pos = torch.full((B, 1), n)
            t0 = time.perf_counter(); step(tok[:, None], pos, bucket(n + 1)); comp = time.perf_counter() - t0
            tok = m(torch.tensor([prompt] * B), torch.arange(n).expand(B, n), bucket(n)).argmax(-1)
            out, ts = [tok[0].item()], []
            for s in range(127):
                t = time.perf_counter()
                tok = step(tok[:, None], pos, bucket(n + s + 1)).argmax(-1)
                ts.append(time.perf_counter() - t); pos += 1; out.append(tok[0].item())
        ms = statistics.median(ts) * 1e3
        print(f"recipe B={B} threads={torch.get_num_threads()}: {ms:.2f} ms/step = {B*1000/ms:.0f} tok/s, "
              f"greedy == fp32 reference for {sum(a == b for a, b in zip(out[:64], ref[:64]))}/64, compile {comp:.1f} s, load {load_str()}")
