#!/usr/bin/env python3
"""Peak memory of Megatron-LM's own functional tests against ptsim, imported as a user would.

Usage: scripts/megatron_memory_check.py MEGATRON_LM_CHECKOUT [--ptsim build/ptsim] [--rev HEAD]

For every GPT test case under tests/functional_tests/test_cases/gpt whose dev_dgx_a100 or
dev_dgx_h100 golden file logs "mem-max-allocated-bytes" (torch.cuda max allocated of the
last rank), the case's model_config.yaml MODEL_ARGS go through `ptsim import megatron-args`
(8 GPUs, the recipes' one node), its ENV_VARS' CUBLAS_WORKSPACE_CONFIG into the scenario,
and the last stage's peak of `ptsim memory` is compared with the figure at the last step.
Cases that resume or freeze a checkpoint, and those with features whose memory ptsim does
not model (fp8, MLA, multi-token prediction, Megatron-FSDP, multi-instance optimizers,
qk-layernorm, resharding; by name or by flag) are left out; the vocabulary of the tests' --vocab-file is GPT-2's BPE, 50,257 tokens,
padded as Megatron pads it. README "Peak memory against measured runs" quotes the result.
Needs git and PyYAML (Debian python3-yaml). Nothing is written outside a temporary folder.
"""
import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import yaml
except ImportError:
    sys.exit("megatron_memory_check.py: needs PyYAML (apt-get install python3-yaml)")

SKIP = ("resume", "frozen", "fp8", "mla", "fsdp", "multi_dist", "qk_layernorm", "reshard", "grpo", "1node")
SKIP_FLAGS = ("--fp8-format", "--multi-latent-attention", "--mtp-num-layers", "--qk-layernorm")
GPT2_VOCAB = 50257


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def args_of(model_args):
    out = []
    for key, value in model_args.items():
        if isinstance(value, bool):
            out += [key] if value else []
        elif not (isinstance(value, str) and "${" in value):  # paths of the CI machine
            out += [key, str(value)]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("megatron", type=Path)
    ap.add_argument("--ptsim", type=Path, default=Path(__file__).resolve().parent.parent / "build" / "ptsim")
    ap.add_argument("--rev", default="HEAD")
    ap.add_argument("--family", default="gpt", help="test_cases folder: gpt (default), moe, ...")
    a = ap.parse_args()
    root = f"tests/functional_tests/test_cases/{a.family}/"
    files = git(a.megatron, "ls-tree", "-r", "--name-only", a.rev, root).split()
    goldens = [f for f in files if re.search(r"/golden_values_dev_dgx_(a100|h100)\.json$", f)]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for golden in goldens:
            case = golden.split("/")[-2]
            if any(word in case for word in SKIP):
                continue
            values = json.loads(git(a.megatron, "show", f"{a.rev}:{golden}")).get("mem-max-allocated-bytes")
            if not isinstance(values, dict) or not values.get("values"):
                continue
            steps = values["values"]
            measured = float(steps[max(steps, key=int)])
            if measured != measured:  # NaN: the golden file has no figure for that step
                continue
            config = yaml.safe_load(git(a.megatron, "show", f"{a.rev}:{root}{case}/model_config.yaml"))
            model_args, env = config.get("MODEL_ARGS") or {}, config.get("ENV_VARS") or {}
            if any(model_args.get(flag) not in (None, False) for flag in SKIP_FLAGS):
                continue
            script = Path(tmp) / f"{case}.sh"
            lines = [f"export CUBLAS_WORKSPACE_CONFIG={env['CUBLAS_WORKSPACE_CONFIG']}"] if "CUBLAS_WORKSPACE_CONFIG" in env else []
            script.write_text("\n".join(lines + [" ".join(args_of(model_args))]) + "\n")
            gpu = "h100" if "h100" in golden else "a100"
            sets = []
            if "--vocab-size" not in model_args:
                divisor = 128 * int(model_args.get("--tensor-model-parallel-size", 1))
                sets += ["--set", f"model.vocab_size={-(-GPT2_VOCAB // divisor) * divisor}"]
            scenario = Path(tmp) / f"{case}-{gpu}.yaml"
            imported = subprocess.run([str(a.ptsim), "import", "megatron-args", str(script), "--gpu", gpu,
                                       "--num-gpus", "8", "-o", str(scenario), *sets], capture_output=True, text=True)
            if imported.returncode != 0:
                print(f"{case} ({gpu}): not imported: {imported.stderr.strip().splitlines()[-1]}")
                continue
            mem = subprocess.run([str(a.ptsim), "memory", str(scenario)], capture_output=True, text=True, check=True)
            last = [l.split() for l in mem.stdout.splitlines() if re.match(r"\s+\d+\s", l)][-1]
            unit = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
            predicted = float(last[-3]) * unit[last[-2]]
            rows.append((case, gpu, "CUBLAS_WORKSPACE_CONFIG" in env, measured, predicted))
    for case, gpu, env, measured, predicted in sorted(rows, key=lambda r: (r[4] - r[3]) / r[3]):
        print(f"{case:70s} {gpu:5s} {'env' if env else '   '} measured {measured / 2**20:9.1f} MiB  "
              f"ptsim {predicted / 2**20:9.1f} MiB  {100 * (predicted - measured) / measured:+6.1f} %")
    for label, subset in (("all", rows), ("with CUBLAS_WORKSPACE_CONFIG", [r for r in rows if r[2]])):
        if subset:
            mean = statistics.mean(abs(r[4] - r[3]) / r[3] for r in subset)
            print(f"{label}: {len(subset)} runs, mean |error| {100 * mean:.2f} %")


if __name__ == "__main__":
    main()
