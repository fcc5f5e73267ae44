#!/usr/bin/env python3
"""PyTorch FSDP1 itself on one GPU, profiled: which kernels FSDP adds to a layer's step.

Companion of layer_step.py, whose `fsdp` variant rebuilds FSDP1's per-layer gradient work by
hand. Here the real torch.distributed.fsdp.FullyShardedDataParallel wraps each MPT-13B block
(fp32 master weights, MixedPrecision(param_dtype=bf16, reduce_dtype=fp32), one FSDP unit per
block, as llm-foundry/Composer wrap MPT) at the reference run's micro-batch, with
use_orig_params False and True. With one rank FSDP runs NO_SHARD (it says so and switches), so
it casts the whole flat parameter to bf16 before use and all-reduces over one rank, which a
sharded run does for 1/world of it; the pre-divide factor is 1. What this shows is how the flat
gradient is made (the split backward's cat, and whether autograd copies it again) and the cast
to reduce_dtype, kernel by kernel. Writes JSON.

usage: fsdp_step.py OUT.json
"""
import json
import os
import statistics
import sys

import torch
import torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import MixedPrecision
from torch.nn.attention import SDPBackend, sdpa_kernel

from layer_step import block, profiled_kernels, timed  # the same MPT block and profile as layer_step.py

D, HEADS, FFN, MBS, SEQ, LAYERS = 5120, 40, 20480, 2, 2048, 4
WARMUP, REPS = 3, 8


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(D, bias=False)
        self.wqkv = torch.nn.Linear(D, 3 * D, bias=False)
        self.wo = torch.nn.Linear(D, D, bias=False)
        self.ln2 = torch.nn.LayerNorm(D, bias=False)
        self.up = torch.nn.Linear(D, FFN, bias=False)
        self.down = torch.nn.Linear(FFN, D, bias=False)

    def forward(self, x):
        return block(x, {n: getattr(self, n).weight for n in ("ln1", "wqkv", "wo", "ln2", "up", "down")}, HEADS)


def run(use_orig_params):
    torch.manual_seed(0)
    mp = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32, buffer_dtype=torch.bfloat16)
    blocks = [FSDP(Block().cuda(), mixed_precision=mp, device_id=0, use_orig_params=use_orig_params)
              for _ in range(LAYERS)]
    model = FSDP(torch.nn.Sequential(*blocks), mixed_precision=mp, device_id=0, use_orig_params=use_orig_params)
    x = torch.randn(MBS, SEQ, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    gout = torch.randn_like(x)

    def step():
        model.zero_grad(set_to_none=True)
        model(x).backward(gout)

    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        times = [timed(step) for _ in range(WARMUP + REPS)][WARMUP:]
        rows = profiled_kernels(step)
    del model, blocks
    torch.cuda.empty_cache()
    return {"use_orig_params": use_orig_params, "per_layer_s": statistics.median(times) / LAYERS,
            "samples_s": times, "kernels": rows}


def main():
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29511")
    dist.init_process_group("nccl", rank=0, world_size=1)
    torch.cuda.set_device(0)
    doc = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "layers": LAYERS,
           "shape": dict(d=D, heads=HEADS, ffn=FFN, mbs=MBS, seq=SEQ), "rows": []}
    for uop in (False, True):
        r = run(uop)
        doc["rows"].append(r)
        print(f"FSDP1 NO_SHARD mpt-13b mbs2 use_orig_params={uop}: {r['per_layer_s'] * 1e3:.3f} ms per layer",
              flush=True)
        for k in r["kernels"][:16]:
            print(f"  {k['us'] / LAYERS:9.1f} us/layer x{k['count']:<4d} {k['kernel'][:90]}", flush=True)
        with open(sys.argv[1], "w") as f:
            json.dump(doc, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
