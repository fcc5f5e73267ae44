#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: runs every CUDA test, a quick and a full `ptsim calibrate`,
# the SM-contention probe (bench/gpu/sm_contention.py) and the list-form gather's host loop
# (bench/gpu/list_gather_host.py), the MPT blocks' training step as FSDP runs it
# (bench/gpu/layer_step.py, fsdp_step.py) and a Mixtral layer's expert-parallel share
# (bench/gpu/moe_step.py), writing logs and tables to OUTDIR.
# usage: scripts/gpu_check.sh OUTDIR [BIN_DIR]
#   BIN_DIR holds ptsim, libptsim_cuda.so and tests/ptsim_kernels_tests (default: build).
#   PTSIM_GPU_STEPS="kernel-tests calibrate-full ..." runs only the steps it names (a short
#   lease); PTSIM_CALIBRATE_FLAGS adds flags to the full calibration (e.g. "--repeats 3").
# Each step has its own time limit and runs even when an earlier one failed; the last lines
# printed are a summary of every step's exit status and wall time.
set -u
out=${1:?usage: scripts/gpu_check.sh OUTDIR [BIN_DIR]}
bin=${2:-build}
name=${PTSIM_TABLE_NAME:-gpu}
here=$(cd "$(dirname "$0")/.." && pwd)
steps="kernel-tests calibrate-quick sm-contention list-gather layer-step fsdp-step moe-step calibrate-full"
for s in ${PTSIM_GPU_STEPS:-}; do
  if [[ " $steps " != *" $s "* ]]; then
    echo "gpu_check.sh: PTSIM_GPU_STEPS names '$s', not a step (steps: $steps)" >&2
    exit 2
  fi
done
# A bare GPU image may lack the Debian libraries ptsim links (yaml-cpp, fmt): say so before
# the lease is spent on steps that cannot start.
for f in "$bin/ptsim" "$bin/libptsim_cuda.so" "$bin/tests/ptsim_kernels_tests"; do
  if [ ! -e "$f" ]; then
    echo "gpu_check.sh: $f is missing (build first, or name the BIN_DIR that holds it)" >&2
    exit 2
  fi
  missing=$(ldd "$f" 2>/dev/null | awk '/not found/ {print $1}' | tr '\n' ' ')
  if [ -n "$missing" ]; then
    echo "gpu_check.sh: $f needs shared libraries this machine lacks: $missing" >&2
    echo "  copy them from the build machine (ldd $f) into a folder and add it to LD_LIBRARY_PATH" >&2
    exit 2
  fi
done
mkdir -p "$out"
summary=()
step() {  # step NAME LIMIT_S LOG CMD...
  local what=$1 limit=$2 log=$3
  shift 3
  if [[ -n "${PTSIM_GPU_STEPS:-}" && " $PTSIM_GPU_STEPS " != *" $what "* ]]; then
    return
  fi
  local t0=$SECONDS
  timeout "$limit" "$@" >"$log" 2>&1
  local rc=$?
  local last
  last=$(grep -E '^\[  (PASSED|FAILED)|^wrote|rror' "$log" | tail -n 1)
  summary+=("$(printf '%-16s rc=%-3s %4ss  %s' "$what" "$rc" "$((SECONDS - t0))" "${last:-$(tail -n 1 "$log")}")")
}
{
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem,power.limit,pcie.link.gen.max \
    --format=csv
  nvidia-smi
  command -v nvcc >/dev/null && nvcc --version
  echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
  ldd "$bin/libptsim_cuda.so"
} >"$out/device.txt" 2>&1
step kernel-tests 240 "$out/kernels_tests.log" "$bin/tests/ptsim_kernels_tests" --gtest_color=no
step calibrate-quick 120 "$out/calibrate_quick.log" "$bin/ptsim" calibrate --quick --name "$name-quick" \
  --out "$out/$name-quick.yaml"
step sm-contention 200 "$out/sm_contention.log" python3 "$here/bench/gpu/sm_contention.py" "$out/sm_contention.json"
step list-gather 200 "$out/list_gather_host.log" python3 "$here/bench/gpu/list_gather_host.py" \
  "$out/list_gather_host.json"
step layer-step 240 "$out/layer_step.log" python3 "$here/bench/gpu/layer_step.py" "$out/layer_step.json"
step fsdp-step 180 "$out/fsdp_step.log" python3 "$here/bench/gpu/fsdp_step.py" "$out/fsdp_step.json"
step moe-step 120 "$out/moe_step.log" python3 "$here/bench/gpu/moe_step.py" "$out/moe_step.json"
step calibrate-full "${PTSIM_FULL_LIMIT:-330}" "$out/calibrate.log" "$bin/ptsim" calibrate --name "$name" \
  --out "$out/$name.yaml" ${PTSIM_CALIBRATE_FLAGS:-}
printf '%s\n' "${summary[@]}"
