#!/usr/bin/env python3
"""A transformer layer's training step as PyTorch FSDP runs it, measured: the check behind
ptsim's per-layer compute time of the FSDP reference runs (scenarios/reference/mpt-*-h100).

Each case is an MPT block (llm-foundry: pre-LayerNorm without biases, fused QKV, causal
attention, GELU MLP of 4 x d, no biases) in bf16 at a reference run's micro-batch, stacked
`layers` deep, forward and backward, optionally under full activation checkpointing
(torch.utils.checkpoint, non-reentrant, as llm-foundry's activation_checkpointing). The
attention is SDPA's FlashAttention-2 kernel. Four variants of the same step, interleaved rep by
rep so that clock drift hits each alike (events, median):

  plain        every weight a leaf of its own (autograd gives each its gradient)
  flat         one flat bf16 parameter per layer, the weights views of it, as FSDP1's
               FlatParameter (flat_param.split -> view): autograd builds the flat gradient
  fsdp         flat, plus what FSDP1's _post_backward_hook does to each layer's unsharded
               gradient on its post-backward stream, beside the next layer's backward
               (torch/distributed/fsdp/_runtime_utils.py, torch 2.1): the cast to reduce_dtype
               fp32 (`flat_param.grad.to(reduce_dtype)`), the pre-divide
               (`_div_if_needed(padded_unsharded_grad, gradient_predivide_factor)`, 8 at 64
               ranks), then, on the shard the reduce-scatter leaves, the post-divide. The
               reduce-scatter itself is not run (one GPU); ptsim times it on the network.
  fsdp_serial  the same kernels on the compute stream: what the side stream saves

A profiled step of `plain` and `fsdp` gives every kernel's device time. Writes JSON.

usage: layer_step.py OUT.json
"""
import json
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.checkpoint import checkpoint

# The reference runs' shapes (scenarios/reference/mpt-*-h100.yaml); world = FSDP ranks.
CASES = [
    dict(name="mpt-13b-64xh100", d=5120, heads=40, ffn=20480, mbs=2, seq=2048, recompute=False, layers=4,
         world=64),
    dict(name="mpt-30b-32xh100", d=7168, heads=64, ffn=28672, mbs=14, seq=2048, recompute=True, layers=2,
         world=32),
    dict(name="mpt-70b-64xh100", d=8192, heads=64, ffn=32768, mbs=8, seq=2048, recompute=True, layers=2,
         world=64),
]
WARMUP, REPS = 3, 8
VARIANTS = ["plain", "flat", "fsdp", "fsdp_serial"]
DT = torch.bfloat16


def predivide_factor(world):
    """torch/distributed/fsdp/_init_utils.py _get_gradient_predivide_factor."""
    factor = 1
    while world % factor == 0 and world / factor > factor:
        factor *= 2
    return float(factor)


def shapes(c):
    d, f = c["d"], c["ffn"]
    return [("ln1", (d,)), ("wqkv", (3 * d, d)), ("wo", (d, d)), ("ln2", (d,)), ("up", (f, d)), ("down", (d, f))]


def block(x, w, heads):
    b, t, d = x.shape
    h = F.layer_norm(x, (d,), w["ln1"])
    qkv = F.linear(h, w["wqkv"]).view(b, t, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
    a = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], is_causal=True)
    x = x + F.linear(a.transpose(1, 2).reshape(b, t, d), w["wo"])
    return x + F.linear(F.gelu(F.linear(F.layer_norm(x, (d,), w["ln2"]), w["up"])), w["down"])


def timed(step):
    """Seconds of one call of `step` on the GPU (events around it, the device idle before)."""
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    step()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / 1e3


def profiled_kernels(step):
    """Every kernel of one call of `step`: name, launches and device microseconds, longest first."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        dev = getattr(e, "self_device_time_total", None)
        if dev is None:
            dev = getattr(e, "self_cuda_time_total", 0)
        if dev > 0:
            rows.append({"kernel": e.key, "count": e.count, "us": dev,
                         "device_type": str(getattr(e, "device_type", ""))})
    rows.sort(key=lambda r: -r["us"])
    return rows


class Stack:
    def __init__(self, c):
        self.c = c
        self.shapes = shapes(c)
        self.numels = [torch.Size(s).numel() for _, s in self.shapes]
        self.side = torch.cuda.Stream()
        self.pre, self.post = predivide_factor(c["world"]), c["world"] / predivide_factor(c["world"])
        self.leaves = []  # per layer: dict of separate leaves
        self.flats = []  # per layer: one flat leaf
        for _ in range(c["layers"]):
            ws = {n: (torch.randn(s, device="cuda", dtype=DT) * (1.0 if len(s) == 1 else s[1] ** -0.5))
                  for n, s in self.shapes}
            self.leaves.append({n: t.clone().requires_grad_() for n, t in ws.items()})
            self.flats.append(torch.cat([ws[n].reshape(-1) for n, _ in self.shapes]).requires_grad_())
        self.mode = None
        for flat in self.flats:
            flat.register_post_accumulate_grad_hook(self.post_backward)

    def views(self, flat):
        parts = flat.split(self.numels)
        return {n: p.view(s) for (n, s), p in zip(self.shapes, parts)}

    def post_backward(self, flat):
        if self.mode not in ("fsdp", "fsdp_serial"):
            flat.grad = None
            return
        grad = flat.grad
        flat.grad = None
        compute = torch.cuda.current_stream()
        stream = self.side if self.mode == "fsdp" else compute
        stream.wait_stream(compute)
        with torch.cuda.stream(stream):
            g32 = grad.to(torch.float32)
            g32.div_(self.pre)
            shard = g32[: g32.numel() // self.c["world"]].clone()
            shard.div_(self.post)
        if stream is not compute:
            grad.record_stream(stream)

    def layer(self, i, x):
        heads = self.c["heads"]
        if self.mode == "plain":
            w = self.leaves[i]
            fn = lambda y, *ts: block(y, dict(zip(w.keys(), ts)), heads)
            args = list(w.values())
        else:
            flat = self.flats[i]
            fn = lambda y, f: block(y, self.views(f), heads)
            args = [flat]
        if self.c["recompute"]:
            return checkpoint(fn, x, *args, use_reentrant=False)
        return fn(x, *args)

    def step(self, x, gout):
        for w in self.leaves:
            for t in w.values():
                t.grad = None
        y = x
        for i in range(self.c["layers"]):
            y = self.layer(i, y)
        y.backward(gout)
        torch.cuda.current_stream().wait_stream(self.side)


def run_case(c):
    torch.manual_seed(0)
    st = Stack(c)
    x = torch.randn(c["mbs"], c["seq"], c["d"], device="cuda", dtype=DT, requires_grad=True)
    gout = torch.randn_like(x)
    times = {v: [] for v in VARIANTS}
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        for rep in range(WARMUP + REPS):
            for v in VARIANTS:
                st.mode = v
                x.grad = None
                t = timed(lambda: st.step(x, gout))
                if rep >= WARMUP:
                    times[v].append(t)
        kernels = {}
        for v in ("plain", "fsdp"):
            st.mode = v
            kernels[v] = profiled_kernels(lambda: st.step(x, gout))
    n = c["layers"]
    per_layer = {v: statistics.median(ts) / n for v, ts in times.items()}
    spread = {v: (max(ts) - min(ts)) / statistics.median(ts) for v, ts in times.items()}
    del st
    torch.cuda.empty_cache()
    return {"case": c, "per_layer_s": per_layer, "spread": spread, "samples_s": times, "kernels": kernels}


def main():
    out_path = sys.argv[1]
    p = torch.cuda.get_device_properties(0)
    doc = {"device": p.name, "sms": p.multi_processor_count, "torch": torch.__version__,
           "cuda": torch.version.cuda, "warmup": WARMUP, "reps": REPS, "rows": []}
    for c in CASES:
        r = run_case(c)
        doc["rows"].append(r)
        pl = r["per_layer_s"]
        print(f"{c['name']:18s} per layer ms: " + "  ".join(f"{v} {pl[v] * 1e3:8.3f}" for v in VARIANTS) +
              f"   fsdp/flat {pl['fsdp'] / pl['flat']:.3f}  flat/plain {pl['flat'] / pl['plain']:.3f}", flush=True)
        for v in ("plain", "fsdp"):
            top = r["kernels"][v][:10]
            print(f"  {v} top kernels (us over {c['layers']} layers, one step):", flush=True)
            for k in top:
                print(f"    {k['us']:10.1f}  x{k['count']:<4d} {k['kernel'][:90]}", flush=True)
        with open(out_path, "w") as f:
            json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
