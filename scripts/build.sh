#!/usr/bin/env bash
# Configures and builds ptsim (Release) into build/. The libraries compile as unity batches
# (CMAKE_UNITY_BUILD: their headers parsed once per batch, not per file); the tests as batches
# of 8 files at -O1 (tests/CMakeLists.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD=ON "$@" >/dev/null
cmake --build build -j"$(nproc)"
