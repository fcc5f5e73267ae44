#!/usr/bin/env bash
# Builds everything and runs the whole test suite through ctest, then the same tests and
# every scenario again under AddressSanitizer + UndefinedBehaviorSanitizer (scripts/sanitize.sh;
# PTSIM_NO_SANITIZE=1 skips that part).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
ctest --test-dir build --output-on-failure -j"$(nproc)"
[ "${PTSIM_NO_SANITIZE:-0}" = 1 ] || ./scripts/sanitize.sh
