#!/usr/bin/env bash
# Runs the GPU test suite (CTest label `gpu`) on a machine with a CUDA device. It uses the build
# in build/release (built on a Debian machine and carried along, or built here beforehand).
#   scripts/gpu-check.sh [ctest -R regex]
# Results: the CTest log and the tests' JSON records under $OUT (default out/gpu-check), packed
# into $OUT/gpu-check.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/pack.sh
OUT=${OUT:-$PWD/out/gpu-check}
mkdir -p "$OUT"
export KBLASTER_EVIDENCE_DIR=$OUT/evidence
. scripts/lib/bwrap.sh
gpu_script_env "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$OUT/nvidia-smi.csv"
args=(--test-dir build/release -L gpu --output-on-failure -j1 --timeout 1800)
[ $# -gt 0 ] && args+=(-R "$1")
ctest "${args[@]}" 2>&1 | tee "$OUT/ctest.log"
status=${PIPESTATUS[0]}
# What the store holds after the suite, as the CLI shows it, and the evidence of each run.
K=build/release/kblaster
$K runs list >"$OUT/runs.txt" 2>&1
for run in $($K runs list --json 2>/dev/null | python3 -c 'import json,sys; print(" ".join(str(r["id"]) for r in json.load(sys.stdin)))' 2>/dev/null); do
  $K runs show "$run" >"$OUT/run-$run.txt" 2>&1
  $K evidence export "$run" --out "$OUT/evidence-run-$run" >/dev/null 2>&1
done
pack "$OUT" gpu-check
exit "$status"
