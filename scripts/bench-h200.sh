#!/usr/bin/env bash
# The benchmark on the GPU machine: PyTorch baselines, then `kblaster bench`, for one suite.
#   scripts/bench-h200.sh [suite] [pytorch methods]   (default: core10, all methods)
# Writes $OUT/bench (report.md, bench.json, bench.csv, speedup.svg, roofline.svg) and
# $OUT/pytorch.json, packed into $OUT/bench.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out/bench-h200}
suite=${1:-core10}
methods=${2:-eager,compile,max-autotune,rms_norm}
mkdir -p "$OUT"
export KBLASTER_CACHE=${KBLASTER_CACHE:-/tmp/kblaster-cache}
export KBLASTER_HOME=${KBLASTER_HOME:-$OUT/store}
if ! command -v bwrap >/dev/null && [ -x build/release/bwrap ] && [ -w /usr/local/bin ]; then
  install -m 0755 build/release/bwrap /usr/local/bin/bwrap
fi
K=$PWD/build/release/kblaster
extra=()
[ "$suite" = llm ] && extra=(--all-shapes)
$K tasks list --suite "$suite" --json >"$OUT/tasks.json"
PYTHONUNBUFFERED=1 python3 scripts/pytorch_baselines.py --tasks "$OUT/tasks.json" --out "$OUT/pytorch.json" --methods "$methods" "${extra[@]}" 2>&1 | tee "$OUT/pytorch.log"
$K -q bench --suite "$suite" --pytorch "$OUT/pytorch.json" --out "$OUT/bench" "${extra[@]}" 2>&1 | tee "$OUT/bench.log"
tar -czf "$OUT/bench.tar.gz" -C "$OUT" bench pytorch.json pytorch.log bench.log tasks.json
