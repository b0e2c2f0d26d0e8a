#!/usr/bin/env bash
# Every portfolio kernel of a suite, then every applicable strategy's default point
# (`kblaster strategies generate`), through `kblaster eval --sanitize` on the GPU machine: all
# four compute-sanitizer tools at the check shapes, then full verification (`--verify-only`: the
# timing gate is the benchmarks' business). An honest kernel must end with every tool clean and
# not rejected. A kernel whose JSON is
# already under $OUT is skipped, so a second call with the same $OUT goes on where one stopped.
#   scripts/gpu-sanitize-portfolio.sh [suite, default core10] [seconds, default 540]
# Environment: EXTRA, more candidate files (portfolio/variants/<task>_<idea>.cu) to check after
# the portfolio; ONLY_EXTRA=1, those files alone (no portfolio kernels, no strategies).
# Output under $OUT (default out/sanitize-portfolio): one JSON and log per kernel, summary.txt,
# the store, packed into sanitize-portfolio.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/pack.sh
SUITE=${1:-core10}
BUDGET=${2:-540}
OUT=${OUT:-$PWD/out/sanitize-portfolio}
K=$PWD/build/release/kblaster
mkdir -p "$OUT"
. scripts/lib/bwrap.sh
gpu_script_env "$OUT"
end=$(($(date +%s) + BUDGET))
status=0
# name task file, one line each: the portfolio kernels, then the strategies' default points.
kernels=()
ONLY_EXTRA=${ONLY_EXTRA:-0}
[ "$ONLY_EXTRA" = 1 ] || for f in portfolio/"$SUITE"/*.cu; do
  name=$(basename "$f" .cu)
  kernels+=("$name ${name%%_*} $f")
done
# EXTRA: more candidate files (<task>_<idea>.cu, variants), checked right after the portfolio.
for f in ${EXTRA:-}; do
  name=$(basename "$f" .cu)
  kernels+=("$name ${name%%_*} $f")
done
mkdir -p "$OUT/strategies"
[ "$ONLY_EXTRA" = 1 ] || for task in $("$K" tasks list --suite "$SUITE" --json | python3 -c 'import json,sys; print(" ".join(t["id"] for t in json.load(sys.stdin)))'); do
  for strategy in $("$K" strategies list --task "$SUITE/$task" --json | python3 -c 'import json,sys; print(" ".join(s["name"] for s in json.load(sys.stdin)))'); do
    f="$OUT/strategies/${task}_$strategy.cu"
    "$K" strategies generate --task "$SUITE/$task" --strategy "$strategy" -o "$f" >/dev/null 2>&1 &&
      kernels+=("${task}_$strategy $task $f")
  done
done
for k in "${kernels[@]}"; do
  read -r name task f <<<"$k"
  [ -f "$OUT/$name.json" ] && continue
  left=$((end - $(date +%s)))
  [ "$left" -gt 20 ] || { echo "stopped before $name: time used up" | tee -a "$OUT/summary.txt"; status=1; break; }
  timeout "$left" "$K" -q eval --task "$SUITE/$task" --candidate "$f" --sanitize --verify-only \
    --json "$OUT/$name.json" >"$OUT/$name.log" 2>&1
  rc=$?
  python3 - "$OUT/$name.json" "$name" "$rc" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
path, name, rc = sys.argv[1:]
try:
    r = json.load(open(path))
except Exception:
    print(f"{name}: no record (exit {rc}) MISMATCH"); sys.exit()
tools = r.get("sanitize", {}) or {}
clean = {t: not v.get("failure") and not v.get("errors") for t, v in tools.items()}
ok = r.get("verdict") not in ("rejected", "error") and len(clean) == 4 and all(clean.values())
tools_text = " ".join(f"{t}={'clean' if c else (tools[t].get('failure') or 'errors')}" for t, c in sorted(clean.items()))
print(f"{name}: {r.get('verdict')} ({r.get('reason')}) {tools_text} {'as expected' if ok else 'MISMATCH'}")
PY
done
grep -q MISMATCH "$OUT/summary.txt" && status=1
pack "$OUT" sanitize-portfolio
exit $status
