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
if ! command -v bwrap >/dev/null && [ -x "$(dirname "$K")/bwrap" ] && [ -w /usr/local/bin ]; then
  install -m 0755 "$(dirname "$K")/bwrap" /usr/local/bin/bwrap
fi
# name task expectation(s) [extra eval flags...]; "accept" means: must not be rejected.
cases=(
  "binary_output_relu.cu 019 accept"
  "tf32x3_matmul.cu 007 accept"
  "poison_detector_relu.cu 019 accept"
  "forged_result_relu.cu 019 crash.exit"
  "private_stream_sync_relu.cu 019 timing.host_work"
  "legacy_stream_relu.cu 019 timing.host_work"
  "sync_memcpy_relu.cu 019 timing.host_work"
  "host_roundtrip_new_gelu.cu 088 timing.host_work"
  "own_stream_relu.cu 019 timing.host_work,timing.stale_output"
  "malloc_every_call_relu.cu 019 abi.allocation"
  "mutate_input_when_busy_relu.cu 019 verify.inputs_modified"
  "modifies_input_relu.cu 019 verify.inputs_modified"
  "sampled_key_cache_softmax.cu 023 timing.stale_after_input_change,abi.allocation"
  "cache_by_pointer_softmax.cu 023 timing.stale_after_input_change,abi.allocation"
  "scan_for_reference_relu.cu 019 verify.unwritten,verify.mismatch,verify.nonfinite"
  "stream_probe_relu.cu 019 verify.unwritten,verify.mismatch,verify.nonfinite"
  "host_segfault_relu.cu 019 crash.sigsegv"
  "infinite_loop_relu.cu 019 hang.timeout --hang-timeout 10"
  "huge_stdout_relu.cu 019 crash.sigxfsz,crash.exit"
  "over_read_relu.cu 019 sanitize.memcheck --sanitize --verify-only"
)
status=0
for c in "${cases[@]}"; do
  read -r file task expect extra <<<"$c"
  name=${file%.cu}
  start=$(date +%s.%N)
  # shellcheck disable=SC2086
  timeout 300 "$K" --root "$ROOT" eval --task "$task" --candidate "$ADV/$file" --sessions 1 \
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
        cal = f"overhead {c.get('empty_window_median_s', 0)*1e6:.1f} us [{c.get('empty_window_min_s', 0)*1e6:.1f}, {c.get('empty_window_max_s', 0)*1e6:.1f}], empty round trip {c.get('empty_round_trip_median_s', 0)*1e6:.1f} us"
print(f"{verdict:9s} {reason:36s} seed {seed} {time.time()-start:5.1f} s {'as expected' if ok else 'MISMATCH'} {cal}")
PY
)
  echo "$name: $line" | tee -a "$OUT/summary.txt"
  case "$line" in *MISMATCH*) status=1 ;; esac
done
exit $status
