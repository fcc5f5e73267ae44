#!/usr/bin/env bash
# The one sanitizer build, build-asan/, shared by scripts/sanitize.sh (the test suite under
# ASan + UBSan) and scripts/fuzz.sh (the libFuzzer targets): clang, Debug at -O1 with libstdc++
# assertions, every object instrumented for AddressSanitizer, UndefinedBehaviorSanitizer (any
# report fatal) and libFuzzer's coverage (-fsanitize=fuzzer-no-link: only the fuzz targets link
# libFuzzer's main), CUDA, MPI and the benchmarks off, libraries built as unity batches.
# One build instead of two (a gcc ASan build and a clang fuzz build) saves CI a full compile,
# and clang compiles these sources at about half gcc's time under ASan (25.9 s → 13.3 s for
# sim/io/scenario_file.cpp, measured).
#   scripts/sanitized_build.sh [target...]      (no target: everything)
set -euo pipefail
cd "$(dirname "$0")/.."
cxx=${SANITIZE_CXX:-$(command -v clang++-14 || command -v clang++)}
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -D_GLIBCXX_ASSERTIONS"
cmake -S . -B build-asan -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" -DCMAKE_UNITY_BUILD=ON \
  -DPTSIM_WITH_CUDA=OFF -DPTSIM_WITH_MPI=OFF -DPTSIM_BUILD_BENCH=OFF -DPTSIM_BUILD_TESTS=ON -DPTSIM_BUILD_FUZZ=ON >/dev/null
if [ $# -gt 0 ]; then
  cmake --build build-asan -j"$(nproc)" --target "$@"
else
  cmake --build build-asan -j"$(nproc)"
fi
