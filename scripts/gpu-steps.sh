#!/usr/bin/env bash
# Runs several GPU jobs in one command on the GPU machine, under one deadline, with what comes back
# kept to a few files (the GPU machine returns at most 8 files from $OUT).
#   scripts/gpu-steps.sh SECONDS STEP...
# The staged build (.xfer/release, from scripts/stage-build.sh) is put in place as build/release
# first. Steps run in order while time is left:
#   check:REGEX          scripts/gpu-check.sh REGEX; its log and archive come back as checkN.*
#   kb:LEVEL:BUDGET[:ONLY[:PYTORCH[:AGAIN]]]
#                        scripts/kernelbench-optimize-h200.sh over .kb/KernelBench (level LEVEL),
#                        resumed from .xfer/kbwork-lLEVEL-DEVICE (DEVICE: h100 or h200; a pass
#                        never mixes devices) when that folder travelled; the work folder comes
#                        back as kbwork-lLEVEL-DEVICE.tar.gz. PYTORCH=1 times PyTorch too.
#                        Results kept in evidence/DEVICE/kernelbench/optimize-lLEVEL/results
#                        (scripts/kernelbench_keep_results.py) count as done; AGAIN=1 measures
#                        the problems ONLY selects again all the same.
#   cmd:COMMAND          any command; its output goes to steps.log
# Every step's output goes to $OUT/steps.log; a step is not started once the deadline has passed.
set -uo pipefail
cd "$(dirname "$0")/.."
SECONDS_LEFT=${1:?usage: scripts/gpu-steps.sh SECONDS STEP...}
shift
DEADLINE=$(($(date +%s) + SECONDS_LEFT))
OUT=${OUT:-$PWD/out/gpu-steps}
mkdir -p "$OUT"
LOG=$OUT/steps.log
exec > >(tee -a "$LOG") 2>&1
echo "pwd $PWD; deadline $(date -u -d @"$DEADLINE" +%T)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
if [ -d .xfer/release ]; then
  mkdir -p build && rm -rf build/release && cp -a .xfer/release build/release
fi
cat build/release/SOURCE 2>/dev/null
device=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -oiE 'h[0-9]+' | tr 'A-Z' 'a-z')
left() { echo $((DEADLINE - $(date +%s))); }
n=0
for step in "$@"; do
  n=$((n + 1))
  if [ "$(left)" -le 20 ]; then
    echo "== step $n not started (deadline): $step"
    continue
  fi
  echo "== step $n ($(left) s left): $step"
  case $step in
    check:*)
      OUT=$OUT/check$n timeout --signal=INT --kill-after=15 "$(($(left) - 10))" \
        scripts/gpu-check.sh "${step#check:}" >/dev/null 2>&1
      echo "rc $?"
      grep -E 'tests passed|\*\*\*Failed|Failed  |Timeout|Total Test' "$OUT/check$n/ctest.log" | tail -40
      cp "$OUT/check$n/ctest.log" "$OUT/check$n.log" 2>/dev/null
      mv "$OUT/check$n/gpu-check.tar.gz" "$OUT/check$n.tar.gz" 2>/dev/null
      rm -rf "$OUT/check$n"
      ;;
    kb:*)
      IFS=: read -r _ level budget only pytorch again <<<"$step"
      work=$PWD/.xfer/kbwork-l$level-${device:-gpu}
      mkdir -p "$work"
      WORK=$work KBLASTER_HOME=$work/store KBLASTER_CACHE=/tmp/kblaster-cache \
        OUT=$work/summary PYTORCH=${pytorch:-0} AGAIN=${again:-0} DEADLINE=$((DEADLINE - 15)) \
        RESUME_FROM=$PWD/evidence/${device:-gpu}/kernelbench/optimize-l$level/results \
        scripts/kernelbench-optimize-h200.sh .kb/KernelBench "$level" --budget "$budget" \
        ${only:+--only "$only"}
      echo "rc $?"
      tar -czf "$OUT/$(basename "$work").tar.gz" -C "$(dirname "$work")" "$(basename "$work")"
      ;;
    cmd:*)
      timeout --kill-after=15 "$(($(left) - 5))" bash -c "${step#cmd:}"
      echo "rc $?"
      ;;
    *) echo "unknown step $step" ;;
  esac
done
echo "== done, $(left) s left"
