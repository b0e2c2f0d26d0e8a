#!/usr/bin/env bash
# The device calibration on the GPU machine: the device's limits (copy and read bandwidth, fp32
# FMA and tensor-core rates), then the timing gate's A/A behaviour over every baseline of a suite
# (false-positive rate, spread, delta), then one evaluation that must pick both up from the store.
#   scripts/gpu-calibrate.sh [suite] [repeats]
# Everything lands in $OUT (default out/gpu-calibrate), packed into $OUT/calibrate.tar.gz.
# Checks (exit 1 when one fails): the limits are positive and below physical sense (bandwidth
# under 20 TB/s, fp32 under 500 TFLOP/s), tensor-core rates above the fp32 rate, the A/A
# false-positive rate at most 10%, and the evaluation names the measured ceilings and the
# calibrated delta.
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/pack.sh
OUT=${OUT:-$PWD/out/gpu-calibrate}
mkdir -p "$OUT"
. scripts/lib/bwrap.sh
gpu_script_env "$OUT"
K=$PWD/build/release/kblaster
suite=${1:-core10}
repeats=${2:-2}
status=0
$K calibrate --device --json "$OUT/device-limits.json" | tee "$OUT/device-limits.txt" || status=1
$K -q calibrate --suite "$suite" --repeats "$repeats" --json "$OUT/calibration.json" | tee "$OUT/calibrate.txt" || status=1
$K eval --task 019 --candidate portfolio/core10/019_relu.cu --json "$OUT/eval-019.json" | tee "$OUT/eval-019.txt"
python3 - "$OUT" <<'PY' || status=1
import json, sys
out = sys.argv[1]
ok = True
def check(cond, what):
    global ok
    print(("ok    " if cond else "FAIL  ") + what)
    ok = ok and cond
lim = json.load(open(f"{out}/device-limits.json"))["limits"]
check(0 < lim["copy_bandwidth"] < 20e12, f"copy bandwidth {lim['copy_bandwidth']/1e12:.3f} TB/s")
check(0 < lim["read_bandwidth"] < 20e12, f"read bandwidth {lim['read_bandwidth']/1e12:.3f} TB/s")
check(0 < lim["fp32_flops"] < 500e12, f"fp32 FMA {lim['fp32_flops']/1e12:.1f} TFLOP/s")
for t in ("fp16", "bf16", "tf32"):
    r = lim.get(f"{t}_tensor_flops")
    check(r is not None and r > lim["fp32_flops"], f"{t} tensor cores {r and r/1e12:.1f} TFLOP/s above fp32")
cal = json.load(open(f"{out}/calibration.json"))["summary"]
check(cal["comparisons"] > 0, f"{cal['comparisons']} A/A comparisons ({cal['failed']} failed)")
check(cal["false_positive_rate"] <= 0.10, f"A/A false-positive rate {100*cal['false_positive_rate']:.1f}% "
      f"(pooled Mann-Whitney {100*cal['pooled_mann_whitney_false_positive_rate']:.1f}%), target 4-6%")
print(f"      spread {100*cal['spread']:.3f}%, delta {100*cal['delta']:.3f}%, empty-kernel overhead {cal['timing_overhead_median_s']}")
ev = json.load(open(f"{out}/eval-019.json"))
ceil = ev["context"]["ceilings"]
check(ceil["measured"] is True, "eval uses the measured ceilings: " + ceil["source"])
delta_source = ev["detail"]["protocol"]["delta_source"]
check("A/A calibration" in delta_source, "eval's delta from the calibration: " + delta_source)
check("test" in (ev.get("gate") or {}), "eval records the block and session test")
sys.exit(0 if ok else 1)
PY
pack "$OUT" calibrate --exclude=store
exit $status
