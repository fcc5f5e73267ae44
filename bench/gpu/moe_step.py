#!/usr/bin/env python3
"""A Mixtral 8x7B layer's training step on one GPU, as one expert-parallel rank of the
Megatron-Core run in scenarios/reference/mcore-mixtral-8x7b-64xh100.yaml computes it: the
check behind ptsim's per-layer compute of that run (README "Validation").

The rank's share of a layer at tensor parallel 1, expert parallel 8, micro-batch 1, sequence
4096, bf16: RMSNorm, the fused QKV projection (32 query heads, 8 key/value groups of 128),
causal attention with grouped heads (cuDNN's fused kernel where PyTorch offers it, as
Transformer Engine picks on Hopper; else FlashAttention-2), the output projection, RMSNorm, the
router (a 4096 x 8 GEMM, fp32 softmax, top-2), the token permutation of Megatron-Core v0.8's
all-to-all dispatcher (argsort of the expert indices, index_select), its one local expert's
SwiGLU MLP (fc1 4096 -> 2 x 14336, fc2 14336 -> 4096) over the 8,192 routed token copies the
rank receives when the routing is balanced (4,096 tokens x top-2 x 8 ranks / 8 experts), the
unpermutation (index_copy, the routing weights, the sum over top-2) and the residual adds.
Not run: the all-to-alls themselves (one GPU; ptsim times them on the network), the rotary
embedding and the auxiliary load-balancing loss (small elementwise work). Forward and backward
of `layers` stacked layers, events, median; one profiled step. Writes JSON.

usage: moe_step.py OUT.json
"""
import json
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from layer_step import profiled_kernels, timed

H, HEADS, GROUPS, FFN, SEQ, TOPK, EXPERTS, EP = 4096, 32, 8, 14336, 4096, 2, 8, 8
LAYERS, WARMUP, REPS = 4, 3, 8
DT = torch.bfloat16


def weights():
    d = H // HEADS
    w = {"norm1": torch.ones(H), "qkv": torch.randn(H + 2 * GROUPS * d, H) * H ** -0.5,
         "proj": torch.randn(H, H) * H ** -0.5, "norm2": torch.ones(H),
         "router": torch.randn(EXPERTS, H) * H ** -0.5, "fc1": torch.randn(2 * FFN, H) * H ** -0.5,
         "fc2": torch.randn(H, FFN) * FFN ** -0.5}
    return {k: v.to("cuda", DT).requires_grad_() for k, v in w.items()}


def attention(q, k, v, backend):
    if backend == "expand":
        rep = HEADS // GROUPS
        return F.scaled_dot_product_attention(q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1),
                                              is_causal=True)
    with sdpa_kernel([backend]):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


def layer(x, w, backend):
    s, b, h = x.shape
    d = h // HEADS
    y = F.rms_norm(x, (h,), w["norm1"])
    qkv = F.linear(y, w["qkv"])
    q, k, v = qkv.split([HEADS * d, GROUPS * d, GROUPS * d], dim=-1)
    q = q.view(s, b, HEADS, d).permute(1, 2, 0, 3)
    k = k.view(s, b, GROUPS, d).permute(1, 2, 0, 3)
    v = v.view(s, b, GROUPS, d).permute(1, 2, 0, 3)
    a = attention(q, k, v, backend).permute(2, 0, 1, 3).reshape(s, b, h)
    x = x + F.linear(a, w["proj"])
    tokens = F.rms_norm(x, (h,), w["norm2"]).view(s * b, h)
    scores = torch.softmax(F.linear(tokens, w["router"]), dim=-1, dtype=torch.float32)
    probs, idx = torch.topk(scores, TOPK, dim=-1)
    order = idx.view(-1).argsort(stable=True)
    routed = tokens.index_select(0, order // TOPK)
    # The rank's one local expert over the copies all eight ranks route to it: as many rows as
    # this rank's own copies when the routing is balanced.
    fc1 = F.linear(routed, w["fc1"])
    gate, up = fc1.chunk(2, dim=-1)
    out = F.linear(F.silu(gate) * up, w["fc2"])
    back = torch.zeros_like(out).index_copy(0, order, out).view(s * b, TOPK, h)
    moe = (back * probs.to(DT).unsqueeze(-1)).sum(dim=1)
    return x + moe.view(s, b, h)


def pick_backend(x, w):
    for backend in (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, "expand"):
        try:
            layer(x, w, backend).sum().backward()
            torch.cuda.synchronize()
            return backend
        except RuntimeError as e:
            print(f"attention backend {backend} not usable: {str(e)[:120]}", flush=True)
    raise RuntimeError("no attention backend ran")


def main():
    torch.manual_seed(0)
    ws = [weights() for _ in range(LAYERS)]
    x = torch.randn(SEQ, 1, H, device="cuda", dtype=DT, requires_grad=True)
    gout = torch.randn_like(x)
    backend = pick_backend(x, ws[0])

    def step():
        for w in ws:
            for t in w.values():
                t.grad = None
        y = x
        for w in ws:
            y = layer(y, w, backend)
        y.backward(gout)

    times = [timed(step) for _ in range(WARMUP + REPS)][WARMUP:]
    rows = profiled_kernels(step)
    per_layer = statistics.median(times) / LAYERS
    doc = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "attention": str(backend),
           "shape": dict(hidden=H, heads=HEADS, groups=GROUPS, ffn=FFN, seq=SEQ, top_k=TOPK, experts=EXPERTS,
                         ep=EP, layers=LAYERS),
           "per_layer_s": per_layer, "spread": (max(times) - min(times)) / statistics.median(times),
           "samples_s": times, "kernels": rows}
    with open(sys.argv[1], "w") as f:
        json.dump(doc, f, indent=1)
    print(f"mixtral layer, one EP rank's share, attention {backend}: {per_layer * 1e3:.3f} ms per layer "
          f"(spread {doc['spread']:.3f})", flush=True)
    for k in rows[:16]:
        print(f"  {k['us'] / LAYERS:9.1f} us/layer x{k['count']:<4d} {k['kernel'][:90]}", flush=True)


if __name__ == "__main__":
    main()
