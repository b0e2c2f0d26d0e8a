#!/usr/bin/env bash
# Issue-level evidence for the judge on the GPU machine, in one job with a built kblaster:
#  1. scripts/judge-check.sh: the candidates that exercise the judge/runner split (cheats rejected
#     with their reasons, honest kernels accepted), with the timing scheme's calibrated overhead;
#  2. every core10 portfolio kernel through `kblaster eval` under the judge (full verification,
#     two timing sessions, the gate): honest kernels must be accepted.
#   scripts/gpu-judge-evidence.sh [seconds for part 2]
# Output under $OUT (default out/judge-evidence): judge-check/, portfolio/, summary.txt, packed
# into judge-evidence.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/provenance.sh
. scripts/lib/pack.sh
OUT=${OUT:-$PWD/out/judge-evidence}
PART2=${1:-240}
K=$PWD/build/release/kblaster
mkdir -p "$OUT/portfolio"
. scripts/lib/bwrap.sh
gpu_script_env "$OUT"
{
  date -u +%FT%TZ
  echo "build $(build_commit)"
  nvidia-smi --query-gpu=name,driver_version,uuid --format=csv,noheader
  nvcc --version 2>/dev/null | tail -n 2
} >"$OUT/env.txt" 2>&1
OUT=$OUT/judge-check scripts/judge-check.sh "$K" . 2>&1 | tee "$OUT/summary.txt"
echo "== portfolio under the judge" | tee -a "$OUT/summary.txt"
deadline=$(($(date +%s) + PART2))
for f in portfolio/core10/*.cu; do
  [ "$(date +%s)" -lt "$deadline" ] || { echo "stopped: time for part 2 used up" | tee -a "$OUT/summary.txt"; break; }
  name=$(basename "$f" .cu)
  task=${name%%_*}
  "$K" -q eval --task "$task" --candidate "$f" --json "$OUT/portfolio/$name.json" >"$OUT/portfolio/$name.log" 2>&1
  rc=$?
  python3 - "$OUT/portfolio/$name.json" "$name" "$rc" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
path, name, rc = sys.argv[1:]
try:
    r = json.load(open(path))
except Exception:
    print(f"{name}: no record (exit {rc})"); sys.exit()
s = r.get("gate") or {}
med = s.get("median_candidate_s"); base = s.get("median_baseline_s")
ms = lambda v: f"{v*1e3:.4f} ms" if isinstance(v, (int, float)) else "-"
print(f"{name}: {r.get('verdict')} ({r.get('reason')}) candidate {ms(med)} baseline {ms(base)} speedup {s.get('speedup')} p {s.get('p')} exit {rc}")
PY
done
pack "$OUT" judge-evidence --exclude=store
