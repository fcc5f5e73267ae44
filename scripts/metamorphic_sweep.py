#!/usr/bin/env python3
"""Metamorphic sweep of the model (README "Reliability", metamorphic sweep).

A run has no oracle, but pairs of runs do: a slower fabric never makes an iteration
faster, more recomputation never raises the peak memory, a larger global batch never
takes less time. For SECONDS from a fixed SEED this script picks a scenario of scenarios/
or scenarios/reference/, applies 0-3 random plan overrides (a random plan that the
scenario accepts), then runs both sides of one relation below (`ptsim run --fold`, or
every rank with --full on scenarios of at most 256 GPUs) and reports every pair that
breaks it by more than one part in 10^9. Pairs where either side fails to run (exit 2: a
plan the scenario cannot take) are skipped and counted.

    scripts/metamorphic_sweep.py build/ptsim 600 42 [--full]

Exit status 1 when any relation broke, else 0.
"""
import glob
import json
import os
import random
import subprocess
import sys
import time

# Plan overrides that keep a scenario runnable often enough to be worth trying.
PLAN = {
    "parallel.tensor_parallel": [1, 2, 4, 8],
    "parallel.pipeline_parallel": [1, 2, 4, 8],
    "parallel.zero_stage": [0, 1, 2, 3],
    "parallel.recompute": ["none", "selective", "full"],
    "parallel.sequence_parallel": ["true", "false"],
    "parallel.pipeline_schedule": ["1f1b", "interleaved-1f1b", "zb-h1", "dualpipe"],
    "parallel.virtual_pipeline_stages": [1, 2],
    "training.micro_batch_size": [1, 2, 4],
    "training.framework": ["megatron-core", "megatron-lm", "deepspeed", "fsdp"],
    "training.attention": ["flash", "naive"],
}

# (name, overrides of side a, overrides of side b, metric, relation of a to b).
# Each must hold by construction of the model, whatever the plan.
RELATIONS = [
    ("4:1 oversubscribed fabric is not faster than 1:1",
     ["cluster.inter_node.oversubscription=4"], ["cluster.inter_node.oversubscription=1"], "iteration_time_s", ">="),
    ("100 Gb/s NICs are not faster than 400 Gb/s",
     ["cluster.inter_node.nic_bandwidth=100 Gb/s"], ["cluster.inter_node.nic_bandwidth=400 Gb/s"],
     "iteration_time_s", ">="),
    ("150 GB/s NVLink is not faster than 600 GB/s",
     ["cluster.intra_node.bandwidth=150 GB/s"], ["cluster.intra_node.bandwidth=600 GB/s"], "iteration_time_s", ">="),
    ("full recompute does not raise the peak memory over none",
     ["parallel.recompute=full"], ["parallel.recompute=none"], "peak", "<="),
    ("full recompute is not faster than none",
     ["parallel.recompute=full"], ["parallel.recompute=none"], "iteration_time_s", ">="),
    ("twice the global batch does not take less time",
     ["training.global_batch_size=1024"], ["training.global_batch_size=512"], "iteration_time_s", ">="),
    ("micro-batch 2 does not lower the peak memory below micro-batch 1",
     ["training.micro_batch_size=2"], ["training.micro_batch_size=1"], "peak", ">="),
    ("sequence 4096 is not faster than 2048",
     ["model.seq_length=4096"], ["model.seq_length=2048"], "iteration_time_s", ">="),
    ("sequence 4096 does not lower the peak memory below 2048",
     ["model.seq_length=4096"], ["model.seq_length=2048"], "peak", ">="),
]


def run(exe, scenario, sets, full):
    cmd = [exe, "run", scenario, "-q", "--json", "-"] + ([] if full else ["--fold"])
    for s in sets:
        cmd += ["--set", s]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        return None
    return json.loads(p.stdout)


def metric(doc, name):
    return doc["memory"]["peak_bytes"] if name == "peak" else doc[name]


def main():
    if len(sys.argv) < 4:
        print(__doc__)
        return 2
    exe, seconds, seed = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    full = "--full" in sys.argv[4:]
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    scenarios = sorted(glob.glob(os.path.join(root, "scenarios", "*.yaml")) +
                       [f for f in glob.glob(os.path.join(root, "scenarios", "reference", "*.yaml"))
                        if not f.endswith("published.yaml")])
    rng = random.Random(seed)
    end = time.time() + seconds
    checked = skipped = 0
    broken = []
    while time.time() < end:
        scenario = rng.choice(scenarios)
        plan = [f"{k}={rng.choice(PLAN[k])}" for k in rng.sample(sorted(PLAN), rng.randint(0, 3))]
        name, a, b, m, rel = rng.choice(RELATIONS)
        if full:
            base = run(exe, scenario, plan, False)
            if base is None or base["world_size"] > 256:
                skipped += 1
                continue
        da, db = run(exe, scenario, plan + a, full), run(exe, scenario, plan + b, full)
        if da is None or db is None:
            skipped += 1
            continue
        va, vb = metric(da, m), metric(db, m)
        ok = va >= vb * (1 - 1e-9) if rel == ">=" else va <= vb * (1 + 1e-9)
        checked += 1
        if not ok:
            line = (f"BROKEN {name}: {os.path.relpath(scenario, root)} {' '.join('--set ' + s for s in plan)}: "
                    f"{m} {va:.6g} against {vb:.6g} ({(va / vb - 1) * 100:+.3f} %)")
            broken.append(line)
            print(line, flush=True)
    print(f"metamorphic sweep: {checked} pairs checked, {skipped} skipped (a side did not run), "
          f"{len(broken)} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
