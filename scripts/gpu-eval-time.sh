#!/usr/bin/env bash
# How long one candidate's full evaluation takes on the GPU machine: every portfolio kernel of a
# suite through `kblaster eval` at the official shape (compile with an empty compile cache,
# verify, two timing sessions), then the median, and where each evaluation's time went (compile,
# each session's stages, the timing loop's phases). Two passes: `cold`, where each evaluation
# compiles its task's oracle and baseline too, and `new candidate`, a source never compiled (the
# kernel with a comment added) for a task whose oracle and baseline are built, as a search meets
# every candidate after its first.
#   scripts/gpu-eval-time.sh [suite, default core10]
# Environment: PASSES (default "cold new-candidate"): which passes to run.
# Output under $OUT (default out/eval-time): one JSON and log per kernel, summary.txt and
# eval-time.json (the figures the summary prints), the second pass's under $OUT/new-candidate.
set -uo pipefail
cd "$(dirname "$0")/.."
SUITE=${1:-core10}
OUT=${OUT:-$PWD/out/eval-time}
K=$PWD/build/release/kblaster
mkdir -p "$OUT"
export KBLASTER_CACHE=$OUT/cache # empty: every evaluation compiles its oracle, baseline, candidate
rm -rf "$KBLASTER_CACHE"
. scripts/lib/bwrap.sh
gpu_script_env "$OUT"
PASSES=${PASSES:-cold new-candidate}
if [[ " $PASSES " == *" cold "* ]]; then
  for f in portfolio/"$SUITE"/*.cu; do
    name=$(basename "$f" .cu)
    "$K" -q eval --task "$SUITE/${name%%_*}" --candidate "$f" --json "$OUT/$name.json" >"$OUT/$name.log" 2>&1
  done
fi
if [[ " $PASSES " == *" new-candidate "* ]]; then
  mkdir -p "$OUT/new-candidate"
  nonce=$(date +%s%N)
  for f in portfolio/"$SUITE"/*.cu; do
    name=$(basename "$f" .cu)
    src="$OUT/new-candidate/$name.cu"
    { cat "$f"; echo "// a source not compiled before: $nonce"; } >"$src"
    "$K" -q eval --task "$SUITE/${name%%_*}" --candidate "$src" --json "$OUT/new-candidate/$name.json" \
      >"$OUT/new-candidate/$name.log" 2>&1
  done
fi
for pass in $PASSES; do
dir="$OUT"; [ "$pass" = cold ] || dir="$OUT/$pass"
echo "== $pass"
python3 - "$dir" "$SUITE" <<'PY'
import glob, json, os, statistics, sys
out = sys.argv[1]
rows = []
for path in sorted(glob.glob(f"{out}/*.json")):
    if path.endswith("eval-time.json"):
        continue
    r = json.load(open(path))
    builds = r.get("builds", {})
    sessions = r.get("detail", {}).get("sessions", [])
    timing = r.get("timing", [])
    rows.append({
        "kernel": os.path.basename(path)[:-5],
        "verdict": r.get("verdict"),
        "seconds": r.get("seconds"),
        "compile_s": {k: v.get("seconds") for k, v in builds.items()},
        "sessions_s": [s.get("seconds") for s in sessions],
        "stages_s": [s.get("stage_seconds") for s in sessions],
        "timing_phases": [t.get("phases") for t in timing if isinstance(t, dict)],
        "timing_total_s": [t.get("total_s") for t in timing if isinstance(t, dict)],
    })
for row in rows:
    print(f"{row['kernel']:24} {row['verdict']:10} {row['seconds']:6.1f} s  sessions "
          + " ".join(f"{s:.1f}" for s in row["sessions_s"] if s is not None))
    for st, ph in zip(row["stages_s"], row["timing_phases"] or [None] * len(row["stages_s"])):
        print(f"    stages {json.dumps(st)}  timing phases {json.dumps(ph)}")
secs = [r["seconds"] for r in rows if r["seconds"] is not None]
median = statistics.median(secs) if secs else None
print(f"median full evaluation: {median:.1f} s over {len(secs)} kernels" if secs else "no evaluation")
json.dump({"suite": sys.argv[2], "median_seconds": median, "evaluations": rows},
          open(f"{out}/eval-time.json", "w"), indent=1)
PY
done | tee "$OUT/summary.txt"
