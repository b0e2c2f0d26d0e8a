#!/usr/bin/env bash
# The benchmark on the GPU machine, one command, one run: for each suite, PyTorch's methods
# (scripts/pytorch_baselines.py: eager, torch.compile, max-autotune without CUDA graphs, and
# F.rms_norm for RMSNorm tasks) and then `kblaster bench` (every portfolio kernel against its
# baseline, with those PyTorch figures beside it), on the same device in the same job.
#   scripts/bench-h200.sh [suite ...]   (default: core10 llm)
# Environment: OUT (default out/bench-h200), METHODS (default eager,compile,max-autotune,rms_norm),
# TORCHINDUCTOR_CACHE_DIR (default $OUT/inductor-cache: TorchInductor's compiled kernels and
# autotuning results), WARM=1: only compile and check PyTorch's methods (no timing, no bench) and
# pack that cache into $OUT/inductor-cache.tar.gz. Compiling max-autotune for every task takes
# minutes; a run whose cache was warmed (by WARM=1 on a machine of the same kind, the cache
# unpacked and named by TORCHINDUCTOR_CACHE_DIR) compiles from it, so that PyTorch's methods and
# the candidates are still measured in one run, within one call of the GPU machine.
# Writes $OUT/<suite>/ (report.md, bench.json, bench.csv, speedup.svg, roofline.svg, pytorch.json,
# pytorch.log, bench.log, tasks.json, env.txt), the layout of evidence/h200/<suite>/, and packs
# it into $OUT/bench.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/provenance.sh
OUT=${OUT:-$PWD/out/bench-h200}
METHODS=${METHODS:-eager,compile,max-autotune,rms_norm}
suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(core10 llm)
K=$PWD/build/release/kblaster
[ -x "$K" ] || { echo "bench-h200: $K not built" >&2; exit 2; }
python3 -c "import torch" 2>/dev/null || { echo "bench-h200: python3 cannot import torch" >&2; exit 2; }
mkdir -p "$OUT"
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-$OUT/inductor-cache}
. scripts/lib/bwrap.sh
gpu_script_env "$OUT"
rc=0
for suite in "${suites[@]}"; do
  dir=$OUT/$suite
  mkdir -p "$dir"
  extra=()
  # The RMSNorm deep case is judged at every bench shape, against a goal of 1.3x over the
  # fastest PyTorch method (Core 10: 1.15x, the command's default).
  [ "$suite" = llm ] && extra=(--all-shapes)
  goals=()
  [ "$suite" = llm ] && goals=(--goal-vs-fastest 1.3)
  {
    date -u +%FT%TZ
    echo "build $(build_commit)"
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader
    nvcc --version 2>/dev/null | tail -n 2
    python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
  } >"$dir/env.txt" 2>&1
  "$K" tasks list --suite "$suite" --json >"$dir/tasks.json" || { rc=1; continue; }
  if [ "${WARM:-0}" = 1 ]; then
    PYTHONUNBUFFERED=1 python3 scripts/pytorch_baselines.py --tasks "$dir/tasks.json" --out "$dir/pytorch-warm.json" \
      --methods "$METHODS" --compile-only --module-dir "$dir/pytorch-modules" "${extra[@]}" 2>&1 |
      tee "$dir/pytorch-warm.log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
    continue
  fi
  PYTHONUNBUFFERED=1 python3 scripts/pytorch_baselines.py --tasks "$dir/tasks.json" --out "$dir/pytorch.json" \
    --methods "$METHODS" --module-dir "$dir/pytorch-modules" "${extra[@]}" 2>&1 | tee "$dir/pytorch.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
  "$K" -q bench --suite "$suite" --pytorch "$dir/pytorch.json" --out "$dir/bench" "${extra[@]}" "${goals[@]}" 2>&1 |
    tee "$dir/bench.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
  # The evidence layout: the report's files beside the PyTorch figures.
  [ -d "$dir/bench" ] && mv -f "$dir/bench"/* "$dir"/ && rmdir "$dir/bench"
done
if [ "${WARM:-0}" = 1 ]; then
  tar -czf "$OUT/inductor-cache.tar.gz" -C "$(dirname "$TORCHINDUCTOR_CACHE_DIR")" "$(basename "$TORCHINDUCTOR_CACHE_DIR")"
  echo "bench-h200: warmed $TORCHINDUCTOR_CACHE_DIR ($(du -sh "$TORCHINDUCTOR_CACHE_DIR" | cut -f1)), packed into $OUT/inductor-cache.tar.gz (exit $rc)"
  exit $rc
fi
tar -czf "$OUT/bench.tar.gz" -C "$OUT" --exclude=store "${suites[@]}"
echo "bench-h200: wrote ${suites[*]} under $OUT (exit $rc)"
exit $rc
