#!/usr/bin/env bash
# Installs the Debian packages ptsim needs (only those missing). Run as root.
set -euo pipefail
pkgs=(cmake g++ make libyaml-cpp-dev libfmt-dev libeigen3-dev libcli11-dev
      nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev libopenmpi-dev openmpi-bin
      clang-14 libclang-rt-14-dev  # these two: libFuzzer targets (scripts/fuzz.sh)
      zlib1g-dev                   # gzip traces (ptsim run --trace F.json.gz)
      chromium)                    # the report's headless-browser test (tests/cli/report_browser.sh)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
