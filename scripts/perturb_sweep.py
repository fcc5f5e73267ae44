#!/usr/bin/env python3
"""Perturbation sweep of the command line (README "Reliability", perturbation sweep).

Runs `ptsim run --fold`, `ptsim memory` and `ptsim zero-report --scenario` on every
scenario of scenarios/ and scenarios/reference/ with 1-4 random `--set` overrides of plan,
training, cluster and model keys (valid and invalid values), for SECONDS from a fixed SEED,
and reports every run that crashes, hangs (120 s), reports a sanitizer error or an internal
error, exits with a code other than 0, 2 or 3, or exits 2 without an `error:` line naming the
file and key. Meant for the sanitizer build:

    scripts/sanitized_build.sh ptsim
    scripts/perturb_sweep.py build-asan/ptsim 600 42

Exit status 1 when any run was reported, else 0.
"""
import glob
import os
import random
import subprocess
import sys
import time

VALUES = {
    "parallel.tensor_parallel": [1, 2, 3, 4, 8, 16, 0, -1, "x"],
    "parallel.pipeline_parallel": [1, 2, 3, 4, 5, 7, 8],
    "parallel.data_parallel": [1, 2, 4, 8],
    "parallel.context_parallel": [1, 2, 4],
    "parallel.expert_parallel": [1, 2, 4, 8],
    "parallel.zero_stage": [0, 1, 2, 3, 4],
    "parallel.recompute": ["none", "selective", "full", "sometimes"],
    "parallel.sequence_parallel": ["true", "false"],
    "parallel.pipeline_schedule": ["1f1b", "gpipe", "interleaved-1f1b", "zb-h1", "zb-v", "dualpipe"],
    "parallel.virtual_pipeline_stages": [1, 2, 3, 4],
    "parallel.overlap_grad_reduce": ["true", "false"],
    "parallel.overlap_param_gather": ["true", "false"],
    "parallel.offload_optimizer": ["true", "false"],
    "parallel.offload_params": ["true", "false"],
    "training.micro_batch_size": [0, 1, 2, 3, 4],
    "training.global_batch_size": [8, 16, 64, 256, 1536],
    "training.framework": ["megatron-core", "megatron-lm", "deepspeed", "fsdp", "jax"],
    "training.precision": ["bf16", "fp16", "fp8", "fp32"],
    "training.attention": ["naive", "flash", "fa2", "cudnn"],
    "cluster.num_gpus": [8, 16, 64, 128, 256, 1024],
    "cluster.gpu": ["a100-sxm-80gb", "h100-sxm", "h200", "mi300x", "b200"],
    "cluster.inter_node.routing": ["ecmp", "d-mod-k"],
    "cluster.link_sharing": ["true", "false"],
    "model.num_layers": [1, 2, 24, 97],
    "model.seq_length": [128, 2048, 131072],
    "model.hidden_size": [1024, 4096, 12288],
}


def command(exe, which, scenario, sets):
    overrides = [a for s in sets for a in ("--set", s)]
    if which == "run":
        return [exe, "run", scenario, "--fold", "-q", "--json", os.devnull] + overrides
    if which == "memory":
        return [exe, "memory", scenario] + overrides
    return [exe, "zero-report", "--scenario", scenario] + overrides


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: perturb_sweep.py PTSIM SECONDS SEED")
    exe, seconds, seed = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    # scenarios/reference/published.yaml holds the published figures, not a scenario.
    scenarios = sorted(glob.glob(os.path.join(root, "scenarios", "*.yaml")) +
                       [f for f in glob.glob(os.path.join(root, "scenarios", "reference", "*.yaml"))
                        if not f.endswith("published.yaml")])
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=1",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1", CUDA_VISIBLE_DEVICES="")
    rng = random.Random(seed)
    start, runs, codes, bad = time.time(), 0, {}, 0
    while time.time() - start < seconds:
        scenario = rng.choice(scenarios)
        which = rng.choice(["run", "memory", "zero-report"])
        keys = rng.sample(sorted(VALUES), rng.randint(1, 4))
        sets = [f"{k}={rng.choice(VALUES[k])}" for k in keys]
        argv = command(exe, which, scenario, sets)
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, cwd=root)
            rc, err = r.returncode, r.stderr
        except subprocess.TimeoutExpired:
            rc, err = "timeout", ""
        runs += 1
        codes[rc] = codes.get(rc, 0) + 1
        if (rc not in (0, 2, 3) or "internal error" in err or "runtime error" in err or "Sanitizer" in err
                or (rc == 2 and "error: " not in err)):
            bad += 1
            print("REPORT", rc, " ".join(argv[1:]), "|", err[-800:].replace("\n", " | "), flush=True)
    print(f"{runs} runs, exit codes {dict(sorted(codes.items(), key=str))}, {bad} reported", flush=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
