#!/usr/bin/env bash
# Captures Nsight Compute CSV (the profiler's fixed plans) of three baselines on the GPU machine,
# for the profiler's parser and classifier tests (tests/data/ncu/):
#   019 relu      a streaming kernel (memory-bound)
#   007 matmul    the tiled fp32 product (compute/latency mix)
#   101 rmsnorm   at 1 x 4096, one block (small grid, latency-bound)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out/ncu}
mkdir -p "$OUT"
export KBLASTER_CACHE=${KBLASTER_CACHE:-/tmp/kblaster-cache}
K=$PWD/build/release/kblaster
declare -A sections=(
  [triage]="--section SpeedOfLight --section LaunchStats --section Occupancy"
  [memory]="--section MemoryWorkloadAnalysis"
  [scheduler]="--section SchedulerStats --section WarpStateStats"
)
capture() { # name task shape kernel-regex
  for plan in triage memory scheduler; do
    # shellcheck disable=SC2086
    timeout 180 ncu --csv --page raw --print-units base --clock-control none ${sections[$plan]} \
      --kernel-name-base demangled -k "regex:$4" -c 1 --target-processes all \
      "$K" eval --task "$2" --shape "$3" --candidate "$(ls tasks/*/"$2"_*/baseline.cu)" --verify-only --seeds 1 --no-sandbox \
      >"$OUT/$1-$plan.csv" 2>"$OUT/$1-$plan.err"
    echo "$1 $plan rc=$? $(wc -l <"$OUT/$1-$plan.csv") lines"
  done
}
capture relu_019 019 official 'naive_kernel<kb_op, float'
capture matmul_007 007 official 'tiled<kb_op, float'
capture rmsnorm_101 101 t1-h4096 'block_per_row<kb_op, float'
ncu --version >"$OUT/ncu-version.txt" 2>&1
tar -czf "$OUT/ncu.tar.gz" -C "$OUT" --exclude ncu.tar.gz .
