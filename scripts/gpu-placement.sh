#!/usr/bin/env bash
# Where the lanes' buffers land, and what it does to an A/A comparison, on the GPU machine: each
# task's baseline against itself with four timing sessions, once with the fixed placement and
# once with the drawn one (`kblaster eval --placement`), then, unless CALIBRATE=0, an A/A
# calibration of the suite with the drawn placement. The summary prints each session's log ratio
# of the medians (candidate over baseline, from gate.session_medians): with the fixed
# placement the sessions after the first agree with each other; a drawn placement should make
# every session a placement of its own.
#   scripts/gpu-placement.sh [task ids, default 088 040 023 019]
# Environment: OUT (default out/placement), SESSIONS (4), REPEATS (3, the calibration's),
# CALIBRATE (1).
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/pack.sh
OUT=${OUT:-$PWD/out/placement}
SESSIONS=${SESSIONS:-4}
REPEATS=${REPEATS:-3}
CALIBRATE=${CALIBRATE:-1}
K=$PWD/build/release/kblaster
mkdir -p "$OUT"
. scripts/lib/bwrap.sh
gpu_script_env "$OUT"
TASKS=${*:-088 040 023 019}
rc=0
for t in $TASKS; do
  dir=$(ls -d tasks/*/"${t}"_* 2>/dev/null | head -1)
  if [ -z "$dir" ]; then
    echo "task $t: no folder under tasks/" >&2
    rc=1
    continue
  fi
  for where in fixed drawn; do
    [ -s "$OUT/$where-$t.json" ] && continue
    "$K" -q eval --task "$t" --candidate "$dir/baseline.cu" --sessions "$SESSIONS" \
      --placement "$where" --json "$OUT/$where-$t.json" >"$OUT/$where-$t.log" 2>&1
  done
done
if [ "$CALIBRATE" = 1 ] && [ ! -s "$OUT/calibration-drawn.json" ]; then
  "$K" -q calibrate --repeats "$REPEATS" --placement drawn --json "$OUT/calibration-drawn.json" \
    >"$OUT/calibration-drawn.txt" 2>&1 || rc=1
fi
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import glob, json, math, os, sys
out = sys.argv[1]
for path in sorted(glob.glob(f"{out}/fixed-*.json") + glob.glob(f"{out}/drawn-*.json")):
    r = json.load(open(path))
    st = r.get("gate") or {}
    logs = [100 * math.log(s["candidate"] / s["baseline"]) for s in st.get("session_medians", [])]
    print(f"{os.path.basename(path)[:-5]:14} {r.get('verdict', '?'):10} "
          f"p between {st.get('p_between', float('nan')):.3f}  sessions "
          + " ".join(f"{x:+.3f}%" for x in logs))
cal = f"{out}/calibration-drawn.txt"
if os.path.exists(cal):
    print(open(cal).read().strip())
PY
pack "$OUT" placement --exclude=store
exit "$rc"
