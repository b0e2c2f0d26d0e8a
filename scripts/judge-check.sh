#!/usr/bin/env bash
# Runs `kblaster eval` on the GPU for the candidates that exercise the judge/runner split and
# prints one line per candidate: verdict, reason, seed, the timing scheme's calibrated overhead.
# Needs a built kblaster (default build/release/kblaster) and a CUDA device.
#   scripts/judge-check.sh [kblaster] [project root] [folder of adversarial .cu files]
# Results: one JSON record and one log per candidate under $OUT (default out/judge-check).
# Expected: every line "as expected"; the calibration shows the cross-process window's overhead.
set -uo pipefail
K=${1:-build/release/kblaster}
ROOT=${2:-.}
ADV=${3:-$ROOT/tests/adversarial}
OUT=${OUT:-$PWD/out/judge-check}
mkdir -p "$OUT"
export KBLASTER_HOME=${KBLASTER_HOME:-$OUT/store}
. "$(dirname "$0")/lib/bwrap.sh"
install_carried_bwrap "$(dirname "$K")"
# The cases are the entries of the adversarial manifest (the GPU test reads the same file), one
# line each: name task expectation(s) [extra eval flags...]; "accept": must not be rejected.
# A regex as $FILTER keeps only the files it matches.
mapfile -t cases < <(python3 - "$ADV/manifest.toml" "${FILTER:-.}" <<'PY'
import re, sys, tomllib
doc = tomllib.load(open(sys.argv[1], "rb"))
for e in doc["candidate"]:
    if not re.search(sys.argv[2], e["file"]):
        continue
    expect = "accept" if e.get("accept") else ",".join(e["expect"])
    extra = []
    if e.get("sanitize"):
        extra += ["--sanitize", "--verify-only"]
    extra += ["--hang-timeout", str(e.get("hang_timeout", 30))]
    print(e["file"], e["task"], expect, *extra)
PY
)
status=0
for c in "${cases[@]}"; do
  read -r file task expect extra <<<"$c"
  name=$(basename "${file%.cu}")
  src=$ADV/$file
  case "$file" in portfolio/*) src=$ROOT/$file ;; esac # an honest portfolio kernel
  start=$(date +%s.%N)
  # shellcheck disable=SC2086
  timeout 300 "$K" --root "$ROOT" eval --task "$task" --candidate "$src" --sessions 1 \
    --max-wall 1 --json "$OUT/$name.json" $extra >"$OUT/$name.log" 2>&1
  rc=$?
  line=$(python3 - "$OUT/$name.json" "$expect" "$rc" "$start" <<'PY'
import json, sys, time
path, expect, rc, start = sys.argv[1], sys.argv[2].split(","), sys.argv[3], float(sys.argv[4])
try:
    r = json.load(open(path))
except Exception as e:
    print(f"NO RECORD (rc {rc}) MISMATCH"); sys.exit()
d = r.get("detail", r)
verdict, reason = d.get("verdict", r.get("verdict")), d.get("reason", r.get("reason"))
ok = (verdict not in ("rejected", "error")) if expect == ["accept"] else (verdict == "rejected" and reason in expect)
seed = d.get("protocol", {}).get("seed_base")
cal = ""
for t in d.get("timing", []) or []:
    c = t.get("calibration", {})
    if c:
        cal = f"overhead {c.get('empty_window_median_s', 0)*1e6:.1f} us [{c.get('empty_window_min_s', 0)*1e6:.1f}, {c.get('empty_window_max_s', 0)*1e6:.1f}], empty kb_launch {c.get('empty_host_median_s', 0)*1e6:.1f} us"
print(f"{verdict:9s} {reason:36s} seed {seed} {time.time()-start:5.1f} s {'as expected' if ok else 'MISMATCH'} {cal}")
PY
)
  echo "$name: $line" | tee -a "$OUT/summary.txt"
  case "$line" in *MISMATCH*) status=1 ;; esac
done
exit $status
