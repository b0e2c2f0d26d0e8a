#!/usr/bin/env bash
# Measurements on the GPU machine beyond the test suite: preflight, the A/A calibration, the
# sandbox's cost, the effect of rotating input sets, and a short optimization run.
#   scripts/gpu-measure.sh [tasks to optimize] [budget per task]
# Everything lands in $OUT (default out/gpu-measure), packed into $OUT/measure.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/pack.sh
OUT=${OUT:-$PWD/out/gpu-measure}
mkdir -p "$OUT"
. scripts/lib/bwrap.sh
gpu_script_env "$OUT"
K=$PWD/build/release/kblaster
tasks=${1:-040,095,023}
budget=${2:-60s}
$K preflight --json "$OUT/preflight.json" | tee "$OUT/preflight.txt"
$K -q calibrate --task 088 --task 019 --repeats 2 --json "$OUT/calibration.json" | tee "$OUT/calibrate.txt"
# The sandbox's cost: the same evaluation with and without it, twice each (the second is cached).
for mode in sandbox no-sandbox sandbox no-sandbox; do
  flag=(); [ "$mode" = no-sandbox ] && flag=(--no-sandbox)
  $K -q eval --task 088 --candidate portfolio/core10/088_new_gelu.cu "${flag[@]}" --json "$OUT/eval-088-$mode.json" | grep -E "verdict|elapsed" | sed "s/^/$mode: /"
done | tee "$OUT/sandbox-overhead.txt"
# Rotating input sets against one set, on a streaming kernel.
for sets in 1 3; do
  $K -q eval --task 019 --candidate portfolio/core10/019_relu.cu --input-sets $sets --json "$OUT/eval-019-sets$sets.json" | grep -E "time|speedup" | sed "s/^/sets=$sets: /"
done | tee "$OUT/input-sets.txt"
IFS=, read -ra ts <<<"$tasks"
for t in "${ts[@]}"; do
  $K optimize --task "$t" --proposer builtin --budget "$budget" --steps 3 --rollouts 2 --json "$OUT/optimize-$t.json" 2>&1 | tail -4
done | tee "$OUT/optimize.txt"
$K memory show | tee "$OUT/memory.txt"
$K runs list >"$OUT/runs.txt"
pack "$OUT" measure --exclude=store
