#!/usr/bin/env bash
# Captures the profiler's fixed Nsight Compute plans on the GPU machine, through
# `kblaster profile --raw` (ncu runs the evaluation worker and profiles the one call inside the
# NVTX range "kb_candidate"), for the parser and classifier tests (tests/data/ncu/):
#   relu_019      the 019 relu baseline: a streaming kernel (memory-bound)
#   matmul_007    the 007 matmul baseline
#   rmsnorm_101   the 101 rmsnorm baseline at t1-h4096: one small block (small grid)
#   fma_loop      tests/data/profile/fma_loop_relu.cu (compute-bound by construction)
#   chain         tests/data/profile/dependent_chain_relu.cu (latency-bound by construction)
# and, for relu, CUPTI's counters, a sandboxed run and an events-only run. Everything is packed
# into $OUT/ncu.tar.gz (one file: few files come back from the GPU machine); the last lines
# printed are a table of the states.
# Usage: OUT=... scripts/capture-ncu.sh   (after building build/release here)
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/provenance.sh
OUT=${OUT:-$PWD/out/ncu}
mkdir -p "$OUT"
WORK=$(mktemp -d)
export KBLASTER_CACHE=${KBLASTER_CACHE:-/tmp/kblaster-cache}
K=$PWD/build/release/kblaster
. scripts/lib/bwrap.sh
install_carried_bwrap

profile() { # name task shape candidate [flags...]
  local name=$1 task=$2 shape=$3 candidate=$4
  shift 4
  timeout 600 "$K" -q profile --task "$task" --shape "$shape" --candidate "$candidate" --json "$WORK/$name.json" "$@" \
    >"$WORK/$name.txt" 2>"$WORK/$name.err"
  echo "$name rc=$? $(grep -A1 -m1 '^state' "$WORK/$name.txt" | tr -s ' ' | tr '\n' ' ')"
}

capture() { # name task shape candidate: the three plans, each in its own worker; NAME-PLAN.csv
  profile "$1" "$2" "$3" "$4" --no-sandbox --plan triage --plan memory --plan scheduler --raw "$WORK/$1.csv"
}

baseline() { ls tasks/*/"$1"_*/baseline.cu; }

{
  ncu --version
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
  echo "build $(build_commit)"
} >"$WORK/environment.txt" 2>&1

capture relu_019 019 official "$(baseline 019)"
capture matmul_007 007 official "$(baseline 007)"
capture rmsnorm_101 101 t1-h4096 "$(baseline 101)"
capture fma_loop 019 official tests/data/profile/fma_loop_relu.cu
capture chain 019 official tests/data/profile/dependent_chain_relu.cu
profile relu_019-cupti 019 official "$(baseline 019)" --no-sandbox --counters cupti
profile relu_019-sandboxed 019 official "$(baseline 019)" --plan triage --raw "$WORK/relu_019-sandboxed.csv"
KBLASTER_NCU=/nonexistent/ncu profile relu_019-events-only 019 official "$(baseline 019)" --no-sandbox

tar -czf "$OUT/ncu.tar.gz" -C "$WORK" .
rm -rf "$WORK"
echo "packed $(tar -tzf "$OUT/ncu.tar.gz" | wc -l) files into $OUT/ncu.tar.gz"
