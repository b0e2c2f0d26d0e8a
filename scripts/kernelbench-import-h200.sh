#!/usr/bin/env bash
# Imports every KernelBench level-1 problem of a KernelBench checkout on the GPU machine and
# verifies each imported task's baseline (eager PyTorch) against its float64 reference (A/A).
#   scripts/kernelbench-import-h200.sh KB_DIR [LEVEL]
# KB_DIR is a KernelBench checkout (KernelBench/level1/*.py under it); nothing of it is copied
# into the repository, only the results. Uses the build in build/release.
#
# Steps, each recorded under $OUT (default evidence/h200/kernelbench):
#   1. `kblaster tasks import` reads every problem file statically (Python's ast; not executed)
#      -> import-static.json (imported / flagged / needs_gpu_evaluation / failed and why).
#   2. The needs_gpu_evaluation files are executed here (scripts/pytorch_oracle.py resolve, the
#      only step that runs the problem files) and imported from that analysis -> import-resolved.json.
#   3. For every imported task: the checker self-test on the PyTorch references
#      (pytorch_oracle.py selftest: do zeros, a copy or a constant pass the official inputs?)
#      -> selftest/<task>.json, and the baseline's A/A (pytorch_oracle.py aa: eager in float32
#      verified on every check shape, distribution and seed -> aa/<task>.verify.json, then
#      timed against itself) -> aa/<task>.json.
#   4. summary.json: per problem the import status, the reason, the self-test's degenerate
#      flags and the A/A verdict; summary.md the same as a table.
set -uo pipefail
cd "$(dirname "$0")/.."
KB_DIR=${1:?usage: scripts/kernelbench-import-h200.sh KB_DIR [LEVEL]}
LEVEL=${2:-1}
OUT=${OUT:-$PWD/evidence/h200/kernelbench}
K=build/release/kblaster
TASKS=$(mktemp -d /tmp/kb-import.XXXXXX)
mkdir -p "$OUT/selftest" "$OUT/aa"
export KBLASTER_GENERATOR_LIB=$PWD/build/release/lib/libkblaster_generator.so
# The problem files run below (resolve, selftest, aa) with an explicit environment, never this
# shell's; they are trusted code by this script's purpose, so the import trusts them (--trust).
source scripts/lib/module_env.sh

src=$(find "$KB_DIR" -path "*/level$LEVEL/*.py" -type f | sort -V)
[ -n "$src" ] || { echo "no level$LEVEL/*.py under $KB_DIR" >&2; exit 65; }
echo "$(echo "$src" | wc -l) problem files of level $LEVEL"
nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$OUT/nvidia-smi.csv"
python3 scripts/pytorch_oracle.py probe | tee "$OUT/pytorch.txt" || { echo "no PyTorch" >&2; exit 3; }

# 1. Static import (exit 65 when some file failed; the results say which).
# shellcheck disable=SC2086
$K tasks import --trust --suite kernelbench --out "$TASKS" $src >"$OUT/import-static.txt" 2>&1
cp "$TASKS/import.json" "$OUT/import-static.json"

# 2. The files the parser could not read: executed here, then imported from their analysis.
pending=$(python3 - "$OUT/import-static.json" <<'EOF'
import json, sys
print(" ".join(r["file"] for r in json.load(open(sys.argv[1])) if r["status"] == "needs_gpu_evaluation"))
EOF
)
if [ -n "$pending" ]; then
  # shellcheck disable=SC2086
  "${MODULE_ENV[@]}" python3 scripts/pytorch_oracle.py resolve $pending --out "$OUT/resolved-analysis.json"
  RES=$(mktemp -d /tmp/kb-resolved.XXXXXX)
  $K tasks import --trust --suite kernelbench --out "$RES" --analysis "$OUT/resolved-analysis.json" \
    >"$OUT/import-resolved.txt" 2>&1
  cp "$RES/import.json" "$OUT/import-resolved.json"
  for d in "$RES"/*/; do
    [ -f "$d/task.toml" ] && rm -rf "$TASKS/$(basename "$d")" && cp -r "$d" "$TASKS/"
  done
fi

# 3. Self-test and A/A for every task that has a contract. The self-tests (no timing) run JOBS at
# a time on the GPU (SELFTEST_DEVICE=cpu for the CPU), at the check shapes, or at the official
# shape for a task resolved by executing its file. The A/A's verification runs in VERIFY_JOBS
# processes at once (no timing in them), then its timing in one process, alone on the GPU. A task
# whose result (or error) is already under $OUT is not run again, so an interrupted run resumes.
STEP_TIMEOUT=${STEP_TIMEOUT:-600}
JOBS=${JOBS:-8}
VERIFY_JOBS=${VERIFY_JOBS:-4}
SELFTEST_DEVICE=${SELFTEST_DEVICE:-cuda}
export OUT STEP_TIMEOUT SELFTEST_DEVICE
selftest_one() {
  d=$1 id=$(basename "$1")
  [ -f "$OUT/selftest/$id.json" ] && return 0
  dev=$SELFTEST_DEVICE
  grep -q '"as_official"' "$d/task.toml" && dev=cuda
  source scripts/lib/module_env.sh # an array does not pass through `export -f`
  timeout "$STEP_TIMEOUT" "${MODULE_ENV[@]}" python3 scripts/pytorch_oracle.py selftest --task "$d" --device "$dev" \
    --out "$OUT/selftest/$id.json" >/dev/null 2>"$OUT/selftest/$id.err" || true
  [ -s "$OUT/selftest/$id.err" ] || rm -f "$OUT/selftest/$id.err"
}
export -f selftest_one
for d in "$TASKS"/*/; do [ -f "$d/task.toml" ] && echo "${d%/}"; done | xargs -r -P "$JOBS" -I{} bash -c 'selftest_one {}'
aa_pending() { # the tasks without an A/A result (or error), and with no $1 file either
  for d in "$TASKS"/*/; do
    [ -f "$d/task.toml" ] || continue
    n=$(basename "$d")
    [ -f "$OUT/aa/$n.json" ] || [ -f "$OUT/aa/$n.err" ] || { [ -n "${1:-}" ] && [ -f "$OUT/aa/$n.${1:-}" ]; } ||
      echo "${d%/}"
  done
}
mapfile -t pending < <(aa_pending verify.json)
if ((${#pending[@]})); then
  for ((w = 0; w < VERIFY_JOBS; ++w)); do
    part=()
    for ((i = w; i < ${#pending[@]}; i += VERIFY_JOBS)); do part+=("${pending[i]}"); done
    ((${#part[@]})) || continue
    "${MODULE_ENV[@]}" python3 scripts/pytorch_oracle.py aa --verify-only --task "${part[@]}" --out-dir "$OUT/aa" \
      --time-limit "$STEP_TIMEOUT" >/dev/null 2>"$OUT/aa/verify-errors-$w.log" &
  done
  wait
fi
mapfile -t pending < <(aa_pending)
if ((${#pending[@]})); then
  "${MODULE_ENV[@]}" python3 scripts/pytorch_oracle.py aa --task "${pending[@]}" --out-dir "$OUT/aa" \
    --time-limit "$STEP_TIMEOUT" >/dev/null 2>"$OUT/aa/errors.log" || true
fi

# 4. One record per problem: summary.json and summary.md.
python3 scripts/kernelbench_summary.py "$OUT"
rm -rf "$TASKS"
