#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz/ in the sanitizer build build-asan/
# (scripts/sanitized_build.sh: clang, address + undefined sanitizers, CUDA and MPI off) and runs each on a copy of its seed corpus
# tests/fuzz/corpus/<target>/ for FUZZ_RUNS inputs (default 20000) from the fixed seed FUZZ_SEED
# (default 1), so a run is reproducible and CI does not turn red by chance; FUZZ_SECONDS
# (default 60) caps the time of each target. Explore with another seed, e.g. FUZZ_SEED=$RANDOM.
# Fails on any crash, leak, timeout,
# out-of-memory or undocumented exception; the input that did it is left in
# build-asan/findings/<target>/ (after the fix, add it to the seed corpus).
#   scripts/fuzz.sh [target...]      (targets: scenario set_override hf_config graph_yaml cost_table nccl_tests)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
runs=${FUZZ_RUNS:-20000}
seed=${FUZZ_SEED:-1}
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(scenario set_override hf_config graph_yaml cost_table nccl_tests)

./scripts/sanitized_build.sh "${targets[@]/#/fuzz_}"

export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
# The targets run side by side, one per core (each libFuzzer process is single-threaded; on CI's
# two cores the six take about half the time they took one after another), and report in order.
lanes=${FUZZ_JOBS:-$(nproc)}
fuzz_one() {
  local t=$1 work=build-asan/corpus/$1 findings=build-asan/findings/$1
  rm -rf "$work" "$findings" && mkdir -p "$work" "$findings"
  cp tests/fuzz/corpus/"$t"/* "$work"/
  # New inputs go to $work (a scratch copy): the committed seeds stay as they are.
  local rc=0
  (cd build-asan && TMPDIR=$PWD ./fuzz/fuzz_"$t" -seed="$seed" -runs="$runs" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
     -print_final_stats=1 -artifact_prefix="findings/$t/" "corpus/$t") >build-asan/fuzz_"$t".log 2>&1 || rc=$?
  echo "$rc" >build-asan/fuzz_"$t".rc
}
for t in "${targets[@]}"; do
  rm -f build-asan/fuzz_"$t".rc
  while [ "$(jobs -rp | wc -l)" -ge "$lanes" ]; do wait -n || true; done
  fuzz_one "$t" &
done
wait
status=0
for t in "${targets[@]}"; do
  log=build-asan/fuzz_$t.log findings=build-asan/findings/$t
  echo "fuzz_$t: $runs runs from seed $seed (at most ${seconds}s)"
  if [ "$(cat build-asan/fuzz_"$t".rc 2>/dev/null)" != 0 ]; then
    echo "fuzz_$t FAILED (log: $log; input: $(ls "$findings" | head -1)):"
    grep -E "ERROR|SUMMARY|undocumented|==[0-9]+==|runtime error|#0 |#1 |#2 |#3 " "$log" | head -30 || true  # the other targets still report
    status=1
  else
    grep -E "stat::number_of_executed_units|cov:" "$log" | tail -2 | sed "s/^/  /"
  fi
done
exit $status
