#!/usr/bin/env bash
# `ptsim run --trace F.json.gz` (README "Reports and traces"): a gzip file whose content is the
# trace `--trace F.json` writes, byte-identical across runs.
set -euo pipefail
exe=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
scenario="$src/tests/cli/data/report_small.yaml"
"$exe" run "$scenario" -q --trace "$work/a.json.gz"
"$exe" run "$scenario" -q --trace "$work/b.json.gz"
"$exe" run "$scenario" -q --trace "$work/plain.json"
cmp "$work/a.json.gz" "$work/b.json.gz" || { echo "FAIL: two runs wrote different gzip traces"; exit 1; }
gzip -t "$work/a.json.gz"
gzip -dc "$work/a.json.gz" | cmp - "$work/plain.json" || { echo "FAIL: the gzip trace is not the plain trace"; exit 1; }
python3 - "$work/a.json.gz" <<'PY'
import gzip, json, sys
doc = json.load(gzip.open(sys.argv[1]))
events = doc["traceEvents"]
flows = [e for e in events if e["ph"] in ("s", "f")]
names = {e["name"].split(" ")[0] for e in events if e["ph"] == "X"}
assert flows and len(flows) % 2 == 0, "no pipeline flow arrows"
assert {"fwd", "bwd", "recompute"} <= names, names
print(f"{len(events)} events, {len(flows) // 2} pipeline flows")
PY
